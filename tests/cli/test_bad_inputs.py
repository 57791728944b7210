"""Every subcommand answers a bad input with one line naming the problem and exit status 2."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.measure.toy import ToyModels

ROOT = Path(__file__).resolve().parents[2]


def _damage(folder: Path, kind: str) -> None:
    weights = folder / "model.safetensors"
    config_path = folder / "tokenizer_config.json"
    if kind == "pickle":
        weights.write_bytes(pickle.dumps({"weight": [1.0, 2.0]}))
    elif kind == "lying-header":
        data = weights.read_bytes()
        (size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + size])
        for name, entry in header.items():
            if name != "__metadata__":
                entry["data_offsets"] = [0, 10**12]
        raw = json.dumps(header).encode()
        weights.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + size :])
    elif kind == "not-json-header":
        raw = b"{this is not json" + b" " * 16
        weights.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 64)
    elif kind in ("unknown-template-type", "unknown-tool-parser", "empty-template"):
        config = json.loads(config_path.read_text(encoding="utf-8"))
        if kind == "unknown-template-type":
            config["chat_template_type"] = "no-such-template-type"
        elif kind == "unknown-tool-parser":
            config["tool_parser_type"] = "no-such-tool-parser"
        else:
            config["chat_template"] = "{% if false %}x{% endif %}"
        config_path.write_text(json.dumps(config), encoding="utf-8")
    else:
        raise AssertionError(kind)


KINDS = (
    "pickle",
    "lying-header",
    "not-json-header",
    "unknown-template-type",
    "unknown-tool-parser",
    "empty-template",
)


@pytest.fixture(scope="module")
def damaged(toy_models: ToyModels, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("damaged")
    folders = {}
    for kind in KINDS:
        folder = base / kind
        shutil.copytree(toy_models.main, folder)
        _damage(folder, kind)
        folders[kind] = folder
    return folders


def _run(*argv: str | bytes) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    return subprocess.run(
        [sys.executable, "-m", "app", *argv], capture_output=True, env=env, cwd=ROOT, timeout=300
    )


def _commands(model: Path, good: Path) -> list[list[str]]:
    m, g = str(model), str(good)
    return [
        ["generate", "--main", m, "--max-tokens", "2", "hello"],
        ["generate", "--main", g, "--draft", m, "--max-tokens", "2", "hello"],
        ["bench", "--main", m, "--draft", g, "--max-tokens", "2", "--classes", "prose"],
        ["agreement", "--main", m, "--draft", g, "--max-tokens", "2", "--classes", "prose"],
    ]


def _check(result: subprocess.CompletedProcess[bytes], what: str, prefix: str = "error: ") -> None:
    out = (result.stdout + result.stderr).decode("utf-8", "replace")
    assert "Traceback" not in out, f"{what}:\n{out}"
    assert result.returncode == 2, f"{what}: exit {result.returncode}\n{out}"
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    assert lines and lines[-1].startswith(prefix), f"{what}:\n{out}"


# Every command loads models through one loader: each damage is tried through generate (as the
# main and as the draft), one through every command; -m heavy tries every damage through every one
@pytest.mark.parametrize(
    ("kind", "commands"),
    [(kind, 4 if kind == "pickle" else 2) for kind in KINDS]
    + [pytest.param(kind, 4, marks=pytest.mark.heavy, id=f"{kind}-all") for kind in KINDS[1:]],
)
def test_damaged_model_gives_one_line_and_status_2(
    kind: str, commands: int, damaged: dict[str, Path], toy_models: ToyModels
) -> None:
    for argv in _commands(damaged[kind], toy_models.draft)[:commands]:
        if (
            kind == "empty-template"
            and "--draft" in argv
            and argv[argv.index("--draft") + 1] == str(damaged[kind])
        ):
            continue  # the draft's template is never rendered: the main's is
        _check(_run(*argv), f"{kind}: {' '.join(argv[:1])}")


def test_prompt_that_is_not_utf8_is_answered_not_a_traceback(toy_models: ToyModels) -> None:
    result = _run("generate", "--main", str(toy_models.main), "--max-tokens", "2", b"caf\xe9 \xff")
    out = (result.stdout + result.stderr).decode("utf-8", "replace")
    assert "Traceback" not in out, out
    assert result.returncode in (0, 2), out


def test_gguf_import_of_a_non_gguf_file(tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(pickle.dumps({"weight": 1}))
    _check(_run("import-gguf", str(bogus), "--out", str(tmp_path / "out")), "import-gguf", "import-gguf: ")


def test_bench_with_a_class_that_has_no_prompts(toy_models: ToyModels) -> None:
    argv = ["bench", "--main", str(toy_models.main), "--max-tokens", "2", "--classes", "no-such-class"]
    _check(_run(*argv), "bench --classes")


@pytest.mark.parametrize("command", ["generate", "bench"])
@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "does not exist"), ("{not json", "is not valid JSON"), ('[{"ssh": "a"}]', "has no IP address")],
)
def test_a_hostfile_that_cannot_be_used_is_named_in_our_words(
    toy_models: ToyModels, tmp_path: Path, command: str, content: str | None, problem: str
) -> None:
    """Checked before any launcher starts: not mlx.launch's own `-c: error:` line."""
    hosts = tmp_path / "hosts.json"
    if content is not None:
        hosts.write_text(content, encoding="utf-8")
    argv = [command, "--main", str(toy_models.main), "--hostfile", str(hosts)]
    result = _run(*argv, *(["hi"] if command == "generate" else ["--max-tokens", "8"]))
    _check(result, f"{command} {problem}")
    last = result.stderr.decode().strip().splitlines()[-1]
    assert problem in last, f"the last line names the problem: {last}"
    assert "hosts.json" in last, f"the last line names hosts.json: {last}"
    assert "-c:" not in last, f"no Python internals shown: {last}"
