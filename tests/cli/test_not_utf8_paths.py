"""A name that is not UTF-8 is refused in one line by every command, never a traceback."""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import COMMANDS, HIDDEN, build_parser, main
from app.cli.utf8_args import FREE_TEXT

ROOT = Path(__file__).resolve().parents[2]


def _text_arguments() -> list[tuple[str, str, list[argparse.Action]]]:
    """(command, the argument's name, the command's required arguments) for every argument of
    every command that takes a name or text other than the message itself."""
    found = []
    for command, (module_name, _) in {**COMMANDS, **HIDDEN}.items():
        parser = argparse.ArgumentParser()
        importlib.import_module(f"app.cli.{module_name}").add_arguments(parser)
        required = [a for a in parser._actions if a.required]
        for action in parser._actions:
            takes_text = action.nargs != 0 and action.type in (None, str, Path) and not action.choices
            if takes_text and action.dest not in FREE_TEXT and action.dest != "help":
                name = (
                    action.option_strings[0] if action.option_strings else str(action.metavar or action.dest)
                )
                found.append((command, name, required))
    return found


ARGUMENTS = _text_arguments()


def test_the_arguments_checked_include_every_kind_of_path() -> None:
    named = {(command, name) for command, name, _ in ARGUMENTS}
    expected = {
        ("toy-models", "OUT"),
        ("generate", "--main"),
        ("generate", "--draft"),
        ("bench", "--json"),
        ("bench", "--prompts"),
        ("import-gguf", "file"),
        ("import-gguf", "--out"),
        ("agreement", "--json"),
        ("compat", "main"),
        ("compat", "draft"),
        ("models", "--folder"),
        ("models", "--models-dir"),
    }
    assert expected <= named, expected - named


@pytest.mark.parametrize(
    ("command", "name", "required"), ARGUMENTS, ids=[f"{c} {n}" for c, n, _ in ARGUMENTS]
)
def test_every_command_refuses_a_name_that_is_not_utf8_in_one_line(
    command: str,
    name: str,
    required: list[argparse.Action],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9-\xff")  # as sys.argv holds such bytes
    good = str(tmp_path / "unused")
    argv, placed = [command], False
    for action in required:  # in order, so that positionals land where they belong
        own = action.option_strings[0] if action.option_strings else str(action.metavar or action.dest)
        value = bad if own == name else good
        placed = placed or own == name
        argv += [own, value] if action.option_strings else [value]
    if not placed:
        argv += [name, bad] if name.startswith("-") else [bad]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, f"the error is one line: {err!r}"
    assert err.startswith(f"error: {name} "), f"the error names the argument: {err!r}"
    assert "is not a UTF-8 name" in err, f"the error says the name is not UTF-8: {err!r}"
    assert "\\xe9-\\xff" in err  # the name as typed, readable in any terminal
    assert list(tmp_path.iterdir()) == []  # the command never ran


def test_the_window_refuses_a_screenshot_folder_that_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = os.fsdecode(os.fsencode(tmp_path) + b"/\xff")
    assert build_parser().parse_args(["--screenshot", bad]).screenshot == bad
    assert main(["--screenshot", bad]) == 2
    assert capsys.readouterr().err.startswith("error: --screenshot ")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [["toy-models", b"OUT\xff"], ["generate", "--main", b"OUT\xff", "--max-tokens", "2", "hello"]],
    ids=["toy-models", "generate"],
)
def test_a_name_that_is_not_utf8_from_the_terminal_gives_one_line(
    tmp_path: Path, argv: list[str | bytes]
) -> None:
    """As a shell passes it: raw bytes in argv. toy-models used to stop with std::bad_cast."""
    argv = [os.fsencode(tmp_path) + b"/" + a if isinstance(a, bytes) else a for a in argv]
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    result = subprocess.run(
        [sys.executable, "-m", "app", *argv], capture_output=True, env=env, cwd=ROOT, timeout=120
    )
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, "a name that is not UTF-8 is a usage error (exit 2)"
    assert "Traceback" not in err, f"no traceback is shown: {err}"
    assert err.count("\n") == 1, f"the error is one line: {err!r}"
    assert err.startswith("error: "), f"it is an error line: {err!r}"
    assert "OUT\\xff is not a UTF-8 name" in err, f"the error says the output name is not UTF-8: {err!r}"
    assert list(tmp_path.iterdir()) == []
