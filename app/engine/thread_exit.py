"""Waiting for a finished thread to be gone from the operating system, not only from Python.

`Thread.join` returns once the thread's Python state is cleared, before its native thread-local
destructors run. MLX keeps per-thread objects whose destructors take the interpreter lock; if the
interpreter is already finalizing by then, the thread is torn down inside a destructor and the
process aborts ("terminate called without an active exception"). Waiting here, while the
interpreter is alive, lets those destructors finish first.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

# without a per-thread entry to watch (macOS has no /proc), a pause long enough for the destructors
PAUSE_S = 0.1


def wait_until_gone(thread: threading.Thread, timeout: float = 2.0) -> bool:
    """True once the joined `thread` has left the process (or cannot be watched, after a pause)."""
    native = thread.native_id
    if thread.is_alive() or native is None:
        return False
    task = Path(f"/proc/self/task/{native}")
    if not sys.platform.startswith("linux") or not task.parent.exists():
        time.sleep(PAUSE_S)
        return True
    deadline = time.monotonic() + timeout
    while task.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True
