"""Ctrl-C and stop signals for a command that owns child processes: one exception, one line.

Python ends on SIGTERM or SIGHUP without running `finally` blocks, and Ctrl-C shows a traceback.
Inside `stopped_by_signals` each of the three raises `Stopped` in the main thread instead, so the
command's clean-up ends its children, and the command prints `Stopped.line()` and exits with the
shell's code for that signal (128 + its number)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):
    """The user or the system asked the command to stop (a BaseException, as KeyboardInterrupt
    is, so no `except Exception` on the way swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def code(self) -> int:
        return 128 + self.signum

    def line(self, what: str) -> str:
        how = "Ctrl-C" if self.signum == signal.SIGINT else signal.Signals(self.signum).name
        return f"stopped ({how}): {what}"


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """Within the block, Ctrl-C, SIGTERM and SIGHUP raise `Stopped`; a second one while the first
    is being handled is ignored, so the clean-up runs to its end."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        for other in SIGNALS:
            signal.signal(other, signal.SIG_IGN)
        raise Stopped(signum)

    previous = {signum: signal.signal(signum, stop) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
