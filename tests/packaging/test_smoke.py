"""`python -m app --smoke-test`, unfrozen: the same code the packaged app runs in CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "QT_QPA_PLATFORM": "offscreen", **env}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=timeout
    )


def _fields(line: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in line.split()[1:])


# .ci/run's packaging/smoke.sh runs the same --smoke-test in the frozen app, and holds its stderr
# to an allow-list as well; the failure path below stays in the default run
@pytest.mark.heavy
def test_smoke_test_generates_with_speculation_and_prints_one_ok_line(tmp_path):
    result = _run("-m", "app", "--smoke-test", SPECCHAT_HOME=str(tmp_path / "home"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, f"the smoke test prints exactly one line: {result.stdout!r}"
    assert lines[0].startswith("SMOKE_OK "), f"that line starts with SMOKE_OK: {result.stdout!r}"
    fields = _fields(lines[0])
    assert int(fields["tokens"]) > 0
    assert float(fields["tok_per_s"]) > 0
    assert 0 <= float(fields["acceptance"]) <= 1
    assert int(fields["proposed"]) > 0, "the smoke answer proposed drafted tokens"
    assert int(fields["k"]) == 4, "the smoke test drafts 4 tokens a round"
    assert fields["frozen"] == "no", "run from a checkout, the app does not say it is frozen"
    assert fields["window"] == "yes", "the smoke test opened a window"
    assert Path(fields["libmlx"]).name.startswith("libmlx.")
    assert "SMOKE_FAIL" not in result.stderr


def test_smoke_test_failure_exits_non_zero_with_the_message(tmp_path):
    result = _run(
        "-m", "app", "--smoke-test", SPECCHAT_SMOKE_TIMEOUT="0", SPECCHAT_HOME=str(tmp_path / "home")
    )
    assert result.returncode == 1
    assert "SMOKE_OK" not in result.stdout
    assert "SMOKE_FAIL timed out" in result.stderr


def test_frozen_entry_runs_app_modules_given_with_dash_m():
    """Child processes start as `sys.executable -m app.<module>`; the frozen entry handles that."""
    entry = str(ROOT / "packaging" / "specchat_main.py")
    as_module = _run(entry, "-m", "app", "--help", timeout=60)
    assert as_module.returncode == 0, "the frozen entry runs `-m app --help`"
    assert "--smoke-test" in as_module.stdout, "`-m app --help` lists --smoke-test"
    direct = _run(entry, "--help", timeout=60)
    assert direct.returncode == 0, "the frozen entry runs `--help` itself"
    assert "--smoke-test" in direct.stdout, "`--help` lists --smoke-test"
