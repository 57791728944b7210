"""Keeps the main model's plain speed known per context bucket, measuring it in the background.

After an answer whose context bucket has no plain speed measured under today's conditions (the
machine's load, the last half hour: `baselines.read_plain`), short `MeasureBaseline`s are
submitted one after another once the worker is idle, until there are enough to say how sure the
speedup is. They never block anything: the worker drops one as soon as another command is queued,
and a new message also cancels it outright. Plain answers feed the same cache. Every change is
announced as a `BaselineStatus`, which the dashboard shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine.features.baselines import (
    FRESH_FOR,
    LOAD_CHANGE,
    MIN_SAMPLES,
    BaselineCache,
    PlainReading,
    context_bucket,
    on_battery,
)
from app.engine.protocol import BaselineMeasured, MeasureBaseline, WorkerMessage
from app.engine.store.history import PlainSpeed, RunHistory
from app.ui.common.engine_bridge import EngineBridge

START_DELAY_MS = 250  # a little idle time first: the user often types the next message at once
# measurements one `want` may start: a load that keeps moving by more than LOAD_CHANGE never
# gives MIN_SAMPLES alike, and the worker is not kept busy for it
MAX_TRIES = 2 * MIN_SAMPLES


@dataclass(frozen=True, slots=True)
class BaselineStatus:
    """What is known of the plain speed at one context; `request` names the generation it is for."""

    main: str
    context_tokens: int
    plain_tok_s: float | None
    measuring: bool = False
    request: int | None = None  # None: news from a measurement, for whoever shows this bucket
    plain_range: tuple[float, float] | None = None  # where plain_tok_s lies 9 times in 10

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
        self.tries = 0  # measurements started since the last `want`
        self.on_battery = on_battery  # whether the computer runs on battery now
        self.measure_on_battery = False  # measure even then (the Models menu's tick)
        bridge.batch.connect(self.on_batch)

    @property
    def measuring(self) -> bool:
        return self.request is not None

    def get(self, main: str, context_tokens: int) -> float | None:
        """Plain tok/s at this context under now's conditions; None while not measured so."""
        return self.cache.get(main, context_tokens)

    def reading(self, main: str, context_tokens: int) -> PlainReading | None:
        return self.cache.reading(main, context_tokens)

    def load(self) -> float | None:
        """The machine's load now, as the cache reads it (an answer is kept with it)."""
        return self.cache.load()

    def feed(self, main: str, context_tokens: int, tok_s: float) -> PlainReading | None:
        """A plain rate seen at this context (a plain answer or a measurement); the reading it
        completes, if any, is given to the runs made under its conditions and announced."""
        reading = self.cache.add(main, context_tokens, tok_s)
        if reading is not None:
            speed = PlainSpeed(
                reading.tok_s, reading.low, reading.high, reading.load, reading.when, FRESH_FOR, LOAD_CHANGE
            )
            self.history.fill_baseline(main, context_bucket(context_tokens), speed)
            self.status.emit(
                BaselineStatus(main, context_tokens, reading.tok_s, plain_range=(reading.low, reading.high))
            )
        return reading

    def want(self, main: str, context_tokens: int) -> bool:
        """Measure this context soon unless it is known under now's conditions; True when a
        measurement is scheduled."""
        if self.cache.reading(main, context_tokens) is not None:
            return False
        self.target, self.tries = (main, context_tokens), 0
        QTimer.singleShot(START_DELAY_MS, self._start)
        return True

    def _start(self) -> None:
        if self.target is None or self.request is not None or not self.idle():
            return
        if not self.measure_on_battery and self.on_battery():
            return  # the next answer asks again, plugged in or not
        self.tries += 1
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
            reading = None
            if isinstance(event, BaselineMeasured):
                self.measured.emit(event)
                main, context = event.main, event.context_tokens
                if event.tok_s is not None:
                    reading = self.feed(main, context, event.tok_s)
                    if reading is None and self.target is None and self.tries < MAX_TRIES:
                        self.target = (main, context)  # not sure yet: another, while still idle
            if reading is None and self.target is None:  # cancelled, no model, or given up for now
                known = self.cache.reading(main, context)
                sure = (known.low, known.high) if known else None
                self.status.emit(
                    BaselineStatus(main, context, known.tok_s if known else None, plain_range=sure)
                )
            if self.target is not None:  # asked for another while this one ran
                QTimer.singleShot(START_DELAY_MS, self._start)
