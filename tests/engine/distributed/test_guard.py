"""A rank leaves once the process that ran it is gone, even while it waits on something else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import app

_RANK = (
    "from app.engine.distributed.guard import guard_rank; guard_rank(); import time; "
    "print('watching', flush=True); time.sleep(60)"
)
_PARENT = textwrap.dedent(
    f"""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", {_RANK!r}])
    print(child.pid, flush=True)
    time.sleep(60)
    """
)


def _running(pid: int) -> bool:
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout
    return bool(state.strip()) and not state.strip().startswith("Z")


def test_a_rank_whose_launcher_is_killed_leaves_within_seconds() -> None:
    root = str(Path(app.__file__).resolve().parents[1])
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert parent.stdout.readline().strip() == "watching"  # the child's check has begun
        assert _running(child)
        parent.send_signal(signal.SIGKILL)  # no handler runs: only the child's own check can see it
        parent.wait()
        deadline = time.monotonic() + 5.0
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(child)
    finally:
        if _running(child):
            os.kill(child, signal.SIGKILL)
