"""`python -m app <command> --help` shows the command's own options."""

from __future__ import annotations

import pytest

from app.cli import COMMANDS, main


@pytest.mark.parametrize(
    "command, option", [("bench", "--modes"), ("import-gguf", "--bits"), ("fetch-models", "--models")]
)
def test_command_help_lists_its_options(
    command: str, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert option in out and COMMANDS[command][1] in out


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)


@pytest.mark.parametrize("command", ["import-gguf", "fetch-models"])
def test_bits_help_says_this_devices_default(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    from app.engine.library.precision import default_bits

    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert f"default here {default_bits()}:" in out
