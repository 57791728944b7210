"""`generate` and `bench` refuse a draft that may not speculate for the main, in one line with
exit status 2, unless `--force` asks for the experiment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPECCHAT_HOME=str(home), QT_QPA_PLATFORM="offscreen")
    return subprocess.run(
        [sys.executable, "-m", "app", *argv], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )


def _argv(command: str, main: Path, draft: Path) -> list[str]:
    tail = ["Hello"] if command == "generate" else ["--classes", "prose", "--modes", "plain,fixed"]
    return [command, "--main", str(main), "--draft", str(draft), "--max-tokens", "4", *tail]


@pytest.mark.parametrize("command", ["generate", "bench"])
def test_an_incompatible_draft_is_refused_in_one_line(command, toy_models, toy_mismatched_draft, tmp_path):
    result = _run(tmp_path, *_argv(command, toy_models.main, toy_mismatched_draft))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: the draft ") and "token 300 differs" in line, line


@pytest.mark.parametrize("command", ["generate", "bench"])
def test_force_runs_the_experiment(command, toy_models, toy_mismatched_draft, tmp_path):
    result = _run(tmp_path, *_argv(command, toy_models.main, toy_mismatched_draft), "--force")
    assert result.returncode == 0, result.stderr
