"""Where a failed action is told: a banner across the top of the window that stays until the user
dismisses it, and a dialog for a failed export. The status bar clears itself after seconds, so a
failure told only there is easily missed; nothing here hides on a timer."""

from __future__ import annotations

import errno

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QMessageBox, QPushButton, QWidget

from app.ui.theme import Theme, current_theme

# The newest few are kept: a burst of failures must not grow the banner past the window.
MAX_MESSAGES = 4

_REASONS = {
    errno.EACCES: "you do not have permission to write there",
    errno.EPERM: "you do not have permission to write there",
    errno.EROFS: "the disk is read-only",
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "your disk quota is used up",
    errno.ENOENT: "the folder does not exist",
    errno.ENOTDIR: "part of the path is a file, not a folder",
    errno.EISDIR: "a folder of that name is in the way",
    errno.ENAMETOOLONG: "the name is too long",
}


def reason(exc: BaseException) -> str:
    """An exception in words, without the path (the caller names it) or the exception's type."""
    if isinstance(exc, OSError):
        if exc.errno in _REASONS:
            return _REASONS[exc.errno]
        if exc.strerror:
            return exc.strerror[:1].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__


def show_error_dialog(parent: QWidget, title: str, text: str) -> QMessageBox:
    """Non-blocking: `open()` returns at once and the box stays until the user closes it."""
    box = QMessageBox(QMessageBox.Icon.Warning, title, text, QMessageBox.StandardButton.Ok, parent)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    box.open()
    return box


class ErrorBanner(QFrame):
    """Hidden until `show_error`; the newest messages, one a line, until Dismiss is pressed."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.set_theme(current_theme())
        self.messages: list[str] = []
        self.label = QLabel("")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # paths and engine text are never markup
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.dismiss_button = QPushButton("Dismiss")
        self.dismiss_button.clicked.connect(self.dismiss)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 10, 6)
        row.addWidget(self.label, 1)
        row.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def set_theme(self, theme: Theme) -> None:
        self.setStyleSheet(
            f"#errorBanner {{ background: {theme.error_bg.name()};"
            f" border-bottom: 1px solid {theme.error_border.name()}; }}"
            f" #errorBanner QLabel {{ color: {theme.error_text.name()}; }}"
        )

    def show_error(self, text: str) -> None:
        if text in self.messages:
            self.messages.remove(text)  # said again: moves to the bottom instead of repeating
        self.messages = [*self.messages, text][-MAX_MESSAGES:]
        self.label.setText("\n".join(self.messages))
        self.show()

    def dismiss(self) -> None:
        self.messages = []
        self.label.setText("")
        self.hide()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""
