"""The app starts as the README says and ends as a user ends it.

`python -m app` runs as a separate process over a fresh data folder, offscreen (and, under
`-m heavy` where `xvfb-run` exists, on a real X server, where .ci/run launches the frozen app),
through `packaging/launch_check.py`, the same check the packaged app's smoke test runs on the
frozen executable: the ready line (written from the running
event loop once the window is exposed and the first scan has answered), still up 20 s later, exit
0 within 5 s of SIGTERM with the window's geometry saved. Nothing else launches the app this way,
so this is the test that keeps it starting.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.ui.launch import READY_PREFIX

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "packaging" / "launch_check.py"


def _displays() -> list[object]:
    # on a real X server: .ci/run's packaging/smoke.sh launches the frozen app the same way there
    xvfb = pytest.param("xvfb", marks=pytest.mark.heavy)
    return ["offscreen", xvfb] if shutil.which("xvfb-run") else ["offscreen"]


@pytest.mark.slow
@pytest.mark.parametrize("display", _displays())
def test_app_starts_stays_up_and_quits_on_sigterm(tmp_path: Path, display: str) -> None:
    home = tmp_path / "home"
    flags = ["--xvfb"] if display == "xvfb" else []
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [
            sys.executable,
            str(CHECK),
            *flags,
            "--stay",
            "5",
            "--home",
            str(home),
            "--",
            sys.executable,
            "-m",
            "app",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"LAUNCH_OK {READY_PREFIX}"), result.stdout


def test_the_check_fails_an_app_that_does_not_start(tmp_path: Path) -> None:
    """A launch that dies at once is reported, not passed: the check itself can fail."""
    crash = [sys.executable, "-c", "raise SystemExit('no window for you')"]
    result = subprocess.run(
        [sys.executable, str(CHECK), "--stay", "1", "--home", str(tmp_path / "h"), "--", *crash],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "LAUNCH_FAIL the app exited with status 1 before its window was up" in result.stderr
