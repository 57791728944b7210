"""Which pair the window loads at start, and the offer of one whose last load did not finish.

A pair is remembered for the next start only once it has loaded. A load is noted as an attempt
when it is asked for and cleared when it succeeds, so an attempt still noted at start did not
finish: it failed, was cancelled, or the app stopped during it (a model that crashes the app as it
loads would otherwise do so at every start). Such a pair is offered, never loaded without asking.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QSettings, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from app.ui.common.theme import Theme, current_theme

if TYPE_CHECKING:
    from app.ui.chat.chat_controller import ChatController

Attempt = tuple[str, str | None, str]  # main, draft, mode ("model", "plain" or "lookup")
LOADED, ATTEMPT = "pair", "pair/attempt"  # pair/main, pair/draft, pair/mode; the same under attempt


def _read(settings: QSettings, prefix: str) -> Attempt | None:
    main = settings.value(f"{prefix}/main")
    if not main:
        return None
    draft = settings.value(f"{prefix}/draft")
    return str(main), str(draft) if draft else None, str(settings.value(f"{prefix}/mode", "model"))


def note_attempt(settings: QSettings, main: str, draft: str | None, mode: str) -> None:
    """A load is asked for: noted until it succeeds."""
    for key, value in (("main", main), ("draft", draft or ""), ("mode", mode)):
        settings.setValue(f"{ATTEMPT}/{key}", value)


def note_loaded(settings: QSettings, main: str, draft: str | None) -> None:
    """The attempt for this pair loaded: it is the pair to load at the next start."""
    attempt = _read(settings, ATTEMPT)
    if attempt is None or attempt[:2] != (main, draft):
        return
    for key, value in zip(("main", "draft", "mode"), attempt, strict=True):
        settings.setValue(f"{LOADED}/{key}", value or "")
    settings.remove(ATTEMPT)


def follow_loads(controller: ChatController, settings: QSettings) -> None:
    """Note each pair the controller reports loaded (a failed or cancelled load leaves none)."""

    def changed(_text: str) -> None:
        if controller.pair is not None:
            note_loaded(settings, *controller.pair)

    controller.pair_changed.connect(changed)


def _name(path: str) -> str:
    return Path(path).name or path


class LastLoadBar(QFrame):
    """Hidden until `offer`; "Load again" emits `load` with the pair, Dismiss forgets it."""

    load = Signal(str, object, str)  # main, draft or None, mode

    def __init__(self, settings: QSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("lastLoad")
        self.settings = settings
        self.attempt: Attempt | None = None
        self.label = QLabel("")
        self.label.setWordWrap(True)
        self.again = QPushButton("Load again")
        self.again.clicked.connect(self._load)
        self.dismiss = QPushButton("Dismiss")
        self.dismiss.clicked.connect(self._forget)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 10, 6)
        row.addWidget(self.label, 1)
        row.addWidget(self.again)
        row.addWidget(self.dismiss)
        self.set_theme(current_theme())
        self.hide()

    def set_theme(self, theme: Theme) -> None:
        self.setStyleSheet(
            f"#lastLoad {{ background: {theme.warning_bg.name()};"
            f" border-bottom: 1px solid {theme.border.name()}; }}"
            f" #lastLoad QLabel {{ color: {theme.warning_text.name()}; }}"
        )

    def offer(self, attempt: Attempt) -> None:
        self.attempt = attempt
        main, draft, _mode = attempt
        names = f"{_name(main)} with the draft {_name(draft)}" if draft else _name(main)
        self.label.setText(f"Last time loading {names} did not finish. Load it again?")
        self.show()

    def _load(self) -> None:
        attempt, self.attempt = self.attempt, None
        self.hide()
        if attempt is not None:
            self.load.emit(*attempt)

    def _forget(self) -> None:
        self.attempt = None
        self.settings.remove(ATTEMPT)
        self.hide()


def start_pair(settings: QSettings, bar: LastLoadBar, load: Callable[[str, str | None, str], None]) -> None:
    """At start: offer a pair whose last load did not finish, else load the last one that did."""
    attempt = _read(settings, ATTEMPT)
    if attempt is not None and Path(attempt[0]).is_dir():
        bar.offer(attempt)
        return
    last = _read(settings, LOADED)
    if last is not None and Path(last[0]).is_dir():
        load(*last)
