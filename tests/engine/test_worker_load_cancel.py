"""Cancel on a model load stops it, not only the window's wait: the worker is free again within a
second, and the memory the load took goes back to the system within a few seconds."""

from __future__ import annotations

import queue
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.engine.protocol import EngineError, LoadPair, PairLoaded, WorkerMessage
from app.engine.worker import EngineWorker

MB = 2**20
STATM = Path("/proc/self/statm")


def rss() -> int:
    """This process's resident memory in bytes (Linux's /proc; the test is skipped elsewhere)."""
    import os

    return int(STATM.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def wait_until(condition, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.mark.heavy
@pytest.mark.skipif(not STATM.exists(), reason="reads resident memory from /proc")
def test_a_cancelled_load_stops_within_a_second_and_gives_its_memory_back(tmp_path):
    # written by another process, so this one holds none of it before the load
    subprocess.run(
        [sys.executable, "-m", "app", "toy-models", str(tmp_path), "--pair", "1.5b-bf16"],
        check=True,
        capture_output=True,
    )
    main = tmp_path / "main"
    inbox: queue.Queue[WorkerMessage] = queue.Queue()
    worker = EngineWorker(inbox.put)
    worker.start()
    try:
        before = rss()
        request = worker.submit(LoadPair(str(main), None, warm_up=False))
        assert wait_until(lambda: rss() > before + 500 * MB, 120), "the load is under way"
        cancelled_at = time.monotonic()
        worker.cancel(request)
        message = inbox.get(timeout=10)
        stopped_after = time.monotonic() - cancelled_at
        assert message.request == request
        assert isinstance(message.event, EngineError), "the load did not finish"
        assert not isinstance(message.event, PairLoaded)
        assert "cancelled" in message.event.message
        assert stopped_after < 1.0, f"the worker was busy {stopped_after:.2f} s after Cancel"
        allowed = max(before * 1.1, before + 300 * MB)
        assert wait_until(lambda: rss() <= allowed, 5), (
            f"resident memory {rss() / MB:.0f} MB, {before / MB:.0f} MB before the load"
        )
    finally:
        assert worker.shutdown(timeout=30)
