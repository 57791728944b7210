"""The window comes back as it was left: size, position, the sidebar's width, the dashboard dock,
and the conversation that was open (in the settings file, app.ui.common.settings)."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QMainWindow, QSplitter

from app.engine.store.conversations import ConversationStore

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


def restore_window(window: QMainWindow, splitter: QSplitter, settings: QSettings) -> None:
    """Put back what `save_window` kept (docks are found by their object names); a first start
    gets the default size."""
    geometry = _bytes(settings, GEOMETRY)
    if geometry is None or not window.restoreGeometry(geometry):
        window.resize(*DEFAULT_SIZE)
    if (state := _bytes(settings, STATE)) is not None:
        window.restoreState(state)
    if (sizes := _bytes(settings, SPLITTER)) is not None:
        splitter.restoreState(sizes)


def save_window(window: QMainWindow, splitter: QSplitter, settings: QSettings) -> None:
    settings.setValue(GEOMETRY, window.saveGeometry())
    settings.setValue(STATE, window.saveState())
    settings.setValue(SPLITTER, splitter.saveState())
    settings.sync()


def remember_conversation(settings: QSettings, cid: int | None) -> None:
    """Called on every switch, so even a crash reopens the conversation last looked at."""
    settings.setValue(CONVERSATION, cid if cid is not None else "")


def conversation_to_reopen(settings: QSettings, store: ConversationStore) -> int | None:
    """The conversation open when the app was left, if it is still in the store."""
    value = settings.value(CONVERSATION)
    try:
        cid = int(str(value))
    except ValueError:
        return None
    return cid if any(c.id == cid for c in store.list()) else None
