"""Memory and time limits for a child process, enforced from outside it.

The parent samples the child's resident memory and ends the child once it passes its limit or its
time is up; this works the same on every platform. An address-space limit (RLIMIT_AS) alone would
not do: macOS does not enforce it, and where it is enforced MLX does not raise when an allocation
is refused but crashes, which the parent cannot tell from any other crash. On Linux the child may
still set one well above the watched limit (`cap_address_space`), as a backstop against a surge
faster than the sampling.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

KILL_GRACE_S = 10.0  # a cancelled child that ignores SIGTERM this long is killed


def this_machine() -> str:
    """How a message names the computer it runs on."""
    return "this Mac" if sys.platform == "darwin" else "this computer"


@dataclass(frozen=True, slots=True)
class Limits:
    memory_bytes: int  # resident memory the child may reach
    seconds: float  # how long it may run


def resident_bytes(pid: int) -> int:
    """The process's resident memory in bytes; 0 once it is gone."""
    if sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError):
            pass
        return 0
    try:  # no /proc on macOS; ps reports the same resident size in KiB
        done = subprocess.run(
            ["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, text=True, timeout=5, check=False
        )
        return int(done.stdout.strip() or 0) * 1024
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0


def cap_address_space(extra: int) -> None:
    """In the child, on Linux: refuse allocations once its address space grows `extra` bytes past
    what it has now. Elsewhere the limit is not enforced, so nothing is set."""
    if not sys.platform.startswith("linux"):
        return
    import resource

    with open("/proc/self/status", encoding="ascii") as f:
        size = next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:")), 0)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = size + extra
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class ChildWatch:
    """Watches a child that leads its own process group (`start_new_session=True`).

    Ends it with SIGKILL when its resident memory passes the limit ("memory") or its time is up
    ("time"); when `cancel` is set it sends SIGTERM so the child can clean up ("cancelled"), and
    SIGKILL if it is still there KILL_GRACE_S later. `reason` says which happened, if any. Call
    `stop` once the child has exited and before reaping it, so its id cannot have been reused.
    """

    def __init__(
        self,
        pid: int,
        limits: Limits,
        *,
        cancel: threading.Event | None = None,
        interval: float = 0.2,  # often enough to catch growth; cheap even where it runs `ps`
        rss: Callable[[int], int] = resident_bytes,
        clock: Callable[[], float] = time.monotonic,
        kill: Callable[[int, int], None] = _signal_group,
    ) -> None:
        self.pid, self.limits, self.cancel, self.interval = pid, limits, cancel, interval
        self._rss, self._clock, self._kill = rss, clock, kill
        self.reason: str | None = None
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.run, daemon=True)

    def start(self) -> ChildWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def run(self) -> None:
        started = self._clock()
        terminated_at: float | None = None
        while not self._stop.is_set():
            now = self._clock()
            if terminated_at is not None:
                if now - terminated_at >= KILL_GRACE_S:
                    self._kill(self.pid, signal.SIGKILL)
                    return
            elif self.cancel is not None and self.cancel.is_set():
                self.reason, terminated_at = "cancelled", now
                self._kill(self.pid, signal.SIGTERM)
            else:
                self.peak = max(self.peak, self._rss(self.pid))
                over = "memory" if self.peak > self.limits.memory_bytes else None
                over = over or ("time" if now - started > self.limits.seconds else None)
                if over is not None:
                    self.reason = over
                    self._kill(self.pid, signal.SIGKILL)
                    return
            self._stop.wait(self.interval)
