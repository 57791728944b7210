"""Keeps the main model's plain speed known per context bucket, measuring it in the background.

After an answer whose context bucket has no plain speed, a short `MeasureBaseline` is submitted
once the worker is idle. It never blocks anything: the worker drops it as soon as another command
is queued, and a new message also cancels it outright. Plain answers feed the same cache. Every
change is announced as a `BaselineStatus`, which the dashboard shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine.features.baselines import BaselineCache, context_bucket
from app.engine.protocol import BaselineMeasured, MeasureBaseline, WorkerMessage
from app.engine.store.history import RunHistory
from app.ui.common.engine_bridge import EngineBridge

START_DELAY_MS = 250  # a little idle time first: the user often types the next message at once


@dataclass(frozen=True, slots=True)
class BaselineStatus:
    """What is known of the plain speed at one context; `request` names the generation it is for."""

    main: str
    context_tokens: int
    plain_tok_s: float | None
    measuring: bool = False
    request: int | None = None  # None: news from a measurement, for whoever shows this bucket

    @property
    def bucket(self) -> int:
        return context_bucket(self.context_tokens)


class PlainBaselines(QObject):
    status = Signal(object)  # BaselineStatus
    measured = Signal(object)  # BaselineMeasured, every outcome (cancelled ones included)

    def __init__(
        self,
        bridge: EngineBridge,
        cache: BaselineCache,
        history: RunHistory,
        idle: Callable[[], bool],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.bridge, self.cache, self.history = bridge, cache, history
        self.idle = idle  # whether the worker has nothing of the user's to do
        self.tokens: int | None = None  # tokens per measurement; None: the engine's default
        self.request: int | None = None
        self.target: tuple[str, int] | None = None  # (main, context) to measure when idle
        self.running: tuple[str, int] | None = None  # (main, context) being measured
        bridge.batch.connect(self.on_batch)

    @property
    def measuring(self) -> bool:
        return self.request is not None

    def get(self, main: str, context_tokens: int) -> float | None:
        return self.cache.get(main, context_tokens)

    def feed(self, main: str, context_tokens: int, tok_s: float) -> float | None:
        """A plain rate seen at this context (a plain answer or a measurement)."""
        value = self.cache.add(main, context_tokens, tok_s)
        if value is not None:
            self.history.fill_baseline(main, context_bucket(context_tokens), value)
            self.status.emit(BaselineStatus(main, context_tokens, value))
        return value

    def want(self, main: str, context_tokens: int) -> bool:
        """Measure this context soon unless its bucket is known; True when one is scheduled."""
        if self.cache.get(main, context_tokens) is not None:
            return False
        self.target = (main, context_tokens)
        QTimer.singleShot(START_DELAY_MS, self._start)
        return True

    def _start(self) -> None:
        if self.target is None or self.request is not None or not self.idle():
            return
        main, context = self.running = self.target
        self.target = None
        command = MeasureBaseline(context) if self.tokens is None else MeasureBaseline(context, self.tokens)
        self.request = self.bridge.submit(command)
        self.status.emit(BaselineStatus(main, context, None, measuring=True))

    def preempt(self) -> None:
        """The user wants the worker: drop what is scheduled and cancel what runs.

        The running request is still followed, so a value that finished just before counts.
        """
        self.target = None
        if self.request is not None:
            self.bridge.cancel(self.request)

    def on_batch(self, batch: tuple[WorkerMessage, ...]) -> None:
        for message in batch:
            if message.request != self.request or self.request is None:
                continue
            event = message.event
            main, context = self.running or ("", 0)
            self.request = self.running = None
            if isinstance(event, BaselineMeasured):
                self.measured.emit(event)
                main, context = event.main, event.context_tokens
                if event.tok_s is not None:
                    self.feed(main, context, event.tok_s)
            if not isinstance(event, BaselineMeasured) or event.tok_s is None:  # cancelled, or no model
                self.status.emit(BaselineStatus(main, context, self.cache.get(main, context)))
            if self.target is not None:  # asked for another while this one ran
                QTimer.singleShot(START_DELAY_MS, self._start)
