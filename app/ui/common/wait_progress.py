"""Live progress for long waits: loading, warm-up, reading the prompt, importing, downloading.

A wait shows up once it is half a second old, as a row with what is happening, the seconds so far,
an estimate of what is left and a button that cancels it. A timer redraws the rows four times a
second, so the elapsed seconds move even while the work itself reports nothing.

Estimates come from the rate seen so far (units done per second); before the first report, from
what the same kind of wait took last time (remembered in QSettings when one is given), else the
row says "estimating…".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QSettings, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

SHOW_AFTER = 0.5  # seconds: shorter waits pass without a row
TICK_MS = 250


def duration(seconds: float) -> str:
    """Whole seconds in words: "7 s", "2 min 05 s"."""
    s = max(0, int(seconds))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


@dataclass
class Wait:
    key: object
    what: str  # "Reading the prompt"
    memory: str  # the kind of wait, for remembering how long it took ("load:<model>"); "": don't
    cancel: Callable[[], None] | None
    cancel_text: str
    started: float
    unit: str = ""  # "tokens": counts are shown as "12 of 40 tokens"
    done: float = 0.0
    total: float = 0.0
    stage_started: float = 0.0  # the rate is timed per stage: stages count in their own units


class WaitRow(QWidget):
    def __init__(self, wait: Wait, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.wait = wait
        self.label, self.bar = QLabel(""), QProgressBar()
        self.bar.setTextVisible(False)
        self.bar.setFixedWidth(140)
        self.bar.setMaximumHeight(10)
        self.button = QPushButton(wait.cancel_text)
        self.button.setVisible(wait.cancel is not None)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 2, 10, 2)
        row.addWidget(self.label, 1)
        row.addWidget(self.bar)
        row.addWidget(self.button)


class WaitPanel(QWidget):
    """The rows of the waits under way, newest last; `changed` carries a row's new text."""

    changed = Signal(object, str)  # key, text

    def __init__(
        self,
        settings: QSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.settings, self.clock = settings, clock
        self.rows: dict[object, WaitRow] = {}
        self.column = QVBoxLayout(self)
        self.column.setContentsMargins(0, 0, 0, 0)
        self.column.setSpacing(0)
        self.timer = QTimer(self, interval=TICK_MS)
        self.timer.timeout.connect(self.tick)
        self.hide()

    # -- the waits ------------------------------------------------------------------------------
    def begin(
        self,
        key: object,
        what: str,
        *,
        memory: str,
        cancel: Callable[[], None] | None = None,
        cancel_text: str = "Cancel",
        unit: str = "",
        total: float = 0.0,
    ) -> None:
        """Start (or restart, with new words) the wait `key`."""
        if key in self.rows:
            self.end(key, finished=False)
        now = self.clock()
        wait = Wait(key, what, memory, cancel, cancel_text, now, unit, total=total, stage_started=now)
        row = WaitRow(wait, self)
        row.setVisible(False)
        if cancel is not None:
            row.button.clicked.connect(lambda: self._cancel(key))
        self.rows[key] = row
        self.column.addWidget(row)
        self.timer.start()
        self.tick()

    def progress(self, key: object, done: float, total: float, what: str | None = None) -> None:
        row = self.rows.get(key)
        if row is None:
            return
        w = row.wait
        if what is not None and what != w.what:
            w.what, w.stage_started = what, self.clock()
        w.done, w.total = done, total
        self.tick()

    def end(self, key: object, *, finished: bool = True) -> None:
        """The wait is over; it teaches the estimate for the next of its kind (a pace seen even if
        it was cancelled, a duration only if it finished)."""
        row = self.rows.pop(key, None)
        if row is None:
            return
        self._remember(row.wait, finished)
        self.column.removeWidget(row)
        row.deleteLater()
        if not self.rows:
            self.timer.stop()
            self.hide()

    def active(self) -> list[object]:
        return list(self.rows)

    def text(self, key: object) -> str:
        row = self.rows.get(key)
        return row.label.text() if row is not None else ""

    def _cancel(self, key: object) -> None:
        row = self.rows.get(key)
        if row is None or row.wait.cancel is None:
            return
        cancel = row.wait.cancel
        self.end(key, finished=False)
        cancel()

    # -- drawing --------------------------------------------------------------------------------
    def tick(self) -> None:
        now = self.clock()
        shown = False
        for key, row in self.rows.items():
            w = row.wait
            elapsed = now - w.started
            if elapsed < SHOW_AFTER:
                continue
            shown = True
            text = self.describe(w, elapsed)
            if w.total > 0:
                row.bar.setRange(0, 1000)
                row.bar.setValue(int(1000 * min(w.done / w.total, 1.0)))
            else:
                row.bar.setRange(0, 0)  # Qt animates a busy bar by itself
            if text != row.label.text():
                row.label.setText(text)
                self.changed.emit(key, text)
            row.setVisible(True)
        self.setVisible(shown)

    def describe(self, w: Wait, elapsed: float) -> str:
        parts = [w.what]
        if w.total > 0 and w.unit:
            parts.append(f"{w.done:,.0f} of {w.total:,.0f} {w.unit}")
        elif w.total > 0:
            parts.append(f"{100 * w.done / w.total:.0f}%")
        parts.append(f"{duration(elapsed)} so far")
        left = self.estimate(w, elapsed)
        parts.append("estimating…" if left is None else f"about {duration(left + 0.5)} left")
        return " · ".join(parts)

    def estimate(self, w: Wait, elapsed: float) -> float | None:
        """Seconds left: from this wait's own rate once it moved, else from the last of its kind."""
        if w.total > 0 and w.done > 0:  # timed from the start: the first chunk's time is real work
            pace = w.done / max(w.started + elapsed - w.stage_started, 1e-6)
            return max(w.total - w.done, 0.0) / pace
        remembered = self._recall(w.memory, "rate")
        if w.total > 0 and remembered:
            return max((w.total - w.done) / remembered - elapsed, 0.0)
        seconds = self._recall(w.memory, "seconds")
        if seconds is not None and w.total <= 0:
            return max(seconds - elapsed, 0.0)
        return None

    # -- memory of past waits -------------------------------------------------------------------
    def _remember(self, w: Wait, finished: bool) -> None:
        seconds = self.clock() - w.started
        if self.settings is None or not w.memory or seconds <= 0:
            return
        if w.total > 0 and w.done > 0:
            self.settings.setValue(f"waits/{w.memory}/rate", w.done / seconds)
        elif w.total <= 0 and finished:
            self.settings.setValue(f"waits/{w.memory}/seconds", seconds)

    def _recall(self, memory: str, what: str) -> float | None:
        if self.settings is None or not memory:
            return None
        value = self.settings.value(f"waits/{memory}/{what}")
        try:
            return float(value) if value is not None else None
        except (TypeError, ValueError):
            return None
