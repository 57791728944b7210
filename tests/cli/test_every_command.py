"""Every command of `python -m app` runs once as a user runs it: a separate process, real
arguments, the toy pair, and an answer a user would recognise as success.

The list is checked against the command table, so a new command without a run here fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from app.cli import COMMANDS, HIDDEN
from app.engine.gguf.fixtures import gguf_path
from app.engine.measure.toy import ToyModels

ROOT = Path(__file__).resolve().parents[2]

Check = Callable[[subprocess.CompletedProcess[str]], None]


def _run(*argv: str, timeout: float = 420) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "app", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )


def _serve_once(*argv: str) -> subprocess.CompletedProcess[str]:
    """`serve` until it says where it serves, one /health request, then SIGTERM."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1")
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    health = ""
    if " at http" in line:
        with urllib.request.urlopen(line.rsplit(" at ", 1)[1].strip().removesuffix("/v1") + "/health") as r:
            health = r.read().decode()
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, line + health + "\n" + out, err)


def _cases(toy: ToyModels, tmp: Path) -> dict[str, tuple[list[str], Check]]:
    main, draft = str(toy.main), str(toy.draft)

    def toy_models(r: subprocess.CompletedProcess[str]) -> None:
        assert (tmp / "toy" / "main" / "config.json").is_file(), r.stdout + r.stderr

    def generate(r: subprocess.CompletedProcess[str]) -> None:
        assert r.stdout.strip(), "no answer text"
        assert "tok/s" in r.stderr, r.stderr

    def bench(r: subprocess.CompletedProcess[str]) -> None:
        assert "plain" in r.stdout and "fixed" in r.stdout, r.stdout

    def import_gguf(r: subprocess.CompletedProcess[str]) -> None:
        assert (tmp / "imported" / "config.json").is_file(), r.stdout + r.stderr

    def fetch_models(r: subprocess.CompletedProcess[str]) -> None:
        assert "SmolLM2" in r.stdout, r.stdout

    def agreement(r: subprocess.CompletedProcess[str]) -> None:
        assert "accept" in (r.stdout + r.stderr).lower(), r.stdout

    def compat(r: subprocess.CompletedProcess[str]) -> None:
        assert "compatible" in r.stdout.lower(), r.stdout

    def models(r: subprocess.CompletedProcess[str]) -> None:
        listed = {entry["path"]: entry for entry in json.loads(r.stdout)["models"]}
        assert listed[main]["suggested_role"] == "main", r.stdout
        assert draft in listed[main]["compatible_drafts"], r.stdout

    def ui_bench(r: subprocess.CompletedProcess[str]) -> None:
        assert "stall" in r.stdout.lower(), r.stdout

    def serve(r: subprocess.CompletedProcess[str]) -> None:
        assert "serving main (+ draft) at http://127.0.0.1:" in r.stdout, r.stdout + r.stderr
        assert '"status": "ok"' in r.stdout, r.stdout
        assert "stopped (SIGTERM)" in r.stderr, r.stderr

    def probe_host(r: subprocess.CompletedProcess[str]) -> None:
        assert json.loads(r.stdout.strip().splitlines()[-1])["mlx_version"], r.stdout

    smollm2 = gguf_path("smollm2")
    return {
        "toy-models": ([str(tmp / "toy"), "--seed", "1"], toy_models),
        "generate": (["--main", main, "--draft", draft, "--max-tokens", "8", "Hello"], generate),
        "bench": (
            [
                "--main",
                main,
                "--draft",
                draft,
                "--modes",
                "plain,fixed",
                "--max-tokens",
                "6",
                "--classes",
                "code",
            ],
            bench,
        ),
        "import-gguf": ([str(smollm2), "--out", str(tmp / "imported"), "--bits", "16"], import_gguf),
        "fetch-models": (["--models", "smollm2", "--bits", "16"], fetch_models),
        "agreement": (
            ["--main", main, "--draft", draft, "--max-tokens", "4", "--classes", "code"],
            agreement,
        ),
        "compat": ([main, draft], compat),
        "models": (["--json", "--folder", str(Path(main).parent), "--no-hub", "--no-lmstudio"], models),
        "ui-bench": (["--tokens", "1500"], ui_bench),
        "serve": (["--main", main, "--draft", draft, "--port", "0", "--no-library"], serve),
        "probe-host": ([], probe_host),
    }


def test_every_command_has_a_run_here(toy_models: ToyModels, tmp_path: Path) -> None:
    assert set(_cases(toy_models, tmp_path)) == set(COMMANDS) | set(HIDDEN)


@pytest.mark.slow
@pytest.mark.parametrize("command", [*COMMANDS, *HIDDEN])
def test_command_runs_as_a_user_runs_it(command: str, toy_models: ToyModels, tmp_path: Path) -> None:
    argv, check = _cases(toy_models, tmp_path)[command]
    if command in ("import-gguf", "fetch-models") and not gguf_path("smollm2").is_file():
        pytest.skip("SmolLM2's GGUF is not fetched (the README's test command fetches it)")
    result = _serve_once(*argv) if command == "serve" else _run(command, *argv)
    assert "Traceback" not in result.stderr, result.stderr
    # ui-bench's verdict is a measurement of this machine, not whether the command works
    # serve runs until stopped: SIGTERM ends it with the shell's code for that signal
    stopped = 128 + signal.SIGTERM if command == "serve" else 0
    assert result.returncode == stopped or (command == "ui-bench" and result.returncode == 1), (
        f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    )
    check(result)
