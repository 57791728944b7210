"""The window comes back as it was left: size, position, the sidebar's width, the dashboard dock,
and the conversation that was open (in the settings file, app.ui.common.settings)."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QMainWindow, QSplitter

from app.engine.store.conversations import ConversationStore
from app.ui.chat.chat_controller import ChatController


class Window(Protocol):
    """What of the main window this module reads (docks are found by their object names)."""

    settings: QSettings
    splitter: QSplitter
    controller: ChatController
    store: ConversationStore

    def refresh_sidebar(self) -> None: ...


DEFAULT_SIZE = (1180, 760)
GEOMETRY, STATE, SPLITTER, CONVERSATION = (
    "window/geometry",
    "window/state",
    "window/splitter",
    "window/conversation",
)


def _bytes(settings: QSettings, key: str) -> QByteArray | None:
    value = settings.value(key)
    return value if isinstance(value, QByteArray) and not value.isEmpty() else None


def restore_window(window: QMainWindow, parts: Window) -> None:
    """Put back what `save_window` kept; a first start gets the default size."""
    s = parts.settings
    geometry = _bytes(s, GEOMETRY)
    if geometry is None or not window.restoreGeometry(geometry):
        window.resize(*DEFAULT_SIZE)
    if (state := _bytes(s, STATE)) is not None:
        window.restoreState(state)
    if (splitter := _bytes(s, SPLITTER)) is not None:
        parts.splitter.restoreState(splitter)


def save_window(window: QMainWindow, parts: Window) -> None:
    s = parts.settings
    s.setValue(GEOMETRY, window.saveGeometry())
    s.setValue(STATE, window.saveState())
    s.setValue(SPLITTER, parts.splitter.saveState())
    s.sync()


def remember_conversation(window: Window) -> None:
    """Called on every switch, so even a crash reopens the conversation last looked at."""
    cid = window.controller.conversation
    window.settings.setValue(CONVERSATION, cid if cid is not None else "")


def reopen_conversation(window: Window) -> None:
    value = window.settings.value(CONVERSATION)
    try:
        cid = int(str(value))
    except ValueError:
        return
    if any(c.id == cid for c in window.store.list()):
        window.controller.open(cid)
        window.refresh_sidebar()
