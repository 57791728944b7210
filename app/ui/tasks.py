"""Running engine-side functions on a Qt thread pool without ever blocking the GUI thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal


class _Signals(QObject):
    done = Signal(object)  # the function's result
    failed = Signal(object)  # the exception it raised


class PoolTask(QRunnable):
    """Run `fn` on a pool thread; its result or exception comes back as a queued signal."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__()
        self.fn, self.signals = fn, _Signals()
        self.setAutoDelete(False)

    def run(self) -> None:
        try:
            result = self.fn()
        except Exception as exc:
            self.signals.failed.emit(exc)
        else:
            self.signals.done.emit(result)


def start_task(
    pool: QThreadPool,
    running: set[PoolTask],
    fn: Callable[[], Any],
    done: Callable[[Any], None],
    failed: Callable[[Exception], None],
) -> None:
    """Start `fn`; `running` holds the task until it reports, so Python keeps its signals alive."""
    task = PoolTask(fn)
    running.add(task)
    for signal, handler in ((task.signals.done, done), (task.signals.failed, failed)):
        signal.connect(handler)
        signal.connect(lambda *_: running.discard(task))
    pool.start(task)
