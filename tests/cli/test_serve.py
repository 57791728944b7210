"""`python -m app serve` refuses an unsafe address at once, in one line, before any model loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_non_loopback_bind_without_a_key_is_refused(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    result = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--main", str(tmp_path / "nothing"), "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"one warning line: {result.stderr}"
    assert "without an API key" in lines[0], f"the warning says there is no API key: {result.stderr}"
    assert "loading" not in result.stderr
