"""Keeps the composer's unsent text as a draft of the conversation it was typed in: saved a
moment after typing stops, on switching conversation and on close; put back when that
conversation is current again. A draft that cannot be saved is said once, then only logged:
the text is still in the box, and a message on every keystroke would be worse than none.

A draft is as long as app.ui.chat.text.long_text keeps (MAX_CHARS), so a save takes milliseconds, and text
the database already holds is not written again: switching away from a long unchanged draft
writes nothing."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QPlainTextEdit

from app.engine.store.write_failure import STORAGE_ERRORS, draft_not_saved
from app.ui.chat.chat_controller import ChatController
from app.ui.chat.text.long_text import MAX_CHARS

SAVE_AFTER_MS = 1000
log = logging.getLogger(__name__)


class DraftKeeper(QObject):
    failed = Signal(str)

    def __init__(
        self,
        editor: QPlainTextEdit,
        controller: ChatController,
        parent: QObject | None = None,
        delay_ms: int = SAVE_AFTER_MS,
    ) -> None:
        super().__init__(parent)
        self.editor, self.controller = editor, controller
        self.key = controller.conversation  # the conversation the editor's text belongs to
        self.warned = False
        self.kept = ""  # what the database holds for `key`, as last read or written
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(delay_ms)
        self.timer.timeout.connect(self.save)
        editor.textChanged.connect(self.timer.start)
        controller.switched.connect(self.switch)
        self._show(self.key)

    def save(self) -> None:
        self.timer.stop()
        text = self.editor.toPlainText()
        if text == self.kept:
            return
        try:
            self.controller.drafts.put(self.key, text)
        except STORAGE_ERRORS as exc:
            self._failed(exc)
        else:
            self.kept = text

    def switch(self) -> None:
        """The controller has another conversation: keep this text with the old one first."""
        self.save()
        self.key = self.controller.conversation
        self._show(self.key)

    def sent(self) -> None:
        """The text was committed with its turn, which removed its draft: empty the box."""
        self.key = self.controller.conversation
        self.kept = ""
        self.editor.clear()
        self.timer.stop()

    def _show(self, key: int | None) -> None:
        try:
            text = self.controller.drafts.get(key, limit=MAX_CHARS + 1)  # past the cap: cut, and said
        except STORAGE_ERRORS as exc:
            text = ""
            self._failed(exc)
        self.kept = text
        self.editor.setPlainText(text)
        self.timer.stop()  # what was just read needs no saving
        self.editor.moveCursor(QTextCursor.MoveOperation.End)

    def _failed(self, exc: BaseException) -> None:
        log.warning("the composer's draft could not be saved or read: %r", exc)
        if not self.warned:
            self.warned = True
            self.failed.emit(draft_not_saved(exc, self.controller.store.path))
