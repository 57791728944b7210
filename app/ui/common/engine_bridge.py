"""The engine worker, seen from the GUI thread.

The engine's `EngineWorker` is the one worker: a single thread that owns every MLX object and
runs loading, generating and cancelling one command at a time. Its callback runs on that thread,
so this bridge only appends messages to a deque (thread-safe for append/popleft) and a QTimer on
the GUI thread drains it every ~40 ms, emitting one signal per batch with the frozen dataclasses.
The GUI therefore never blocks on the worker and never repaints per token; the worker never
touches Qt.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine.protocol import Command, WorkerMessage
from app.engine.worker import EngineWorker

DRAIN_MS = 40


class Engine(Protocol):
    def start(self) -> None: ...
    def submit(self, command: Command, sink: Callable[[WorkerMessage], None] | None = None) -> int: ...
    def cancel(self, request: int | None = None) -> None: ...
    def shutdown(self, timeout: float = 10.0) -> bool: ...
    @property
    def is_alive(self) -> bool: ...


EngineFactory = Callable[[Callable[[WorkerMessage], None]], Engine]


class EngineBridge(QObject):
    batch = Signal(object)  # tuple[WorkerMessage, ...], in arrival order

    def __init__(
        self,
        factory: EngineFactory = EngineWorker,
        interval_ms: int = DRAIN_MS,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._inbox: collections.deque[WorkerMessage] = collections.deque()
        self.engine: Engine = factory(self._inbox.append)
        self.engine.start()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.drain)
        self._timer.start()
        self._closed = False

    def submit(self, command: Command) -> int:
        return self.engine.submit(command)

    def cancel(self, request: int | None = None) -> None:
        """Cancel `request` (queued or running), or whatever runs when None."""
        self.engine.cancel(request)

    def drain(self) -> None:
        """Emit everything that arrived since the last tick as one batch."""
        n = len(self._inbox)
        if n:
            self.batch.emit(tuple(self._inbox.popleft() for _ in range(n)))

    def engine_still_running(self) -> bool:
        """True while the worker thread is inside a command that has not reached a safe point."""
        return self.engine.is_alive

    def shutdown(self, wait: float = 5.0) -> None:
        """Cancel and stop the worker. Cancelling is checked between rounds, so this is quick;
        with wait=0 the join happens on a helper thread and the GUI does not wait at all."""
        if self._closed:
            return
        self._closed = True
        self._timer.stop()
        self.engine.cancel()
        if wait > 0:
            self.engine.shutdown(timeout=wait)
        else:
            threading.Thread(target=self.engine.shutdown, name="specchat-engine-stop", daemon=True).start()
