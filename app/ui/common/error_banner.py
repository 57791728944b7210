"""Where a failed action is told: a banner across the top of the window that stays until the user
dismisses it, and a dialog for a failed export. The status bar clears itself after seconds, so a
failure told only there is easily missed; nothing here hides on a timer.

A failure is said in plain words; its technical account (a path, a header length, an exception),
where there is one, waits behind a Details toggle, for a bug report or a search."""

from __future__ import annotations

import errno

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QMessageBox, QPushButton, QVBoxLayout, QWidget

from app.ui.common.theme import Theme, current_theme

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
        self.details: dict[str, str] = {}  # a message's technical account, when it has one
        self.label, self.detail_label = QLabel(""), QLabel("")
        for label in (self.label, self.detail_label):
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.PlainText)  # paths and engine text are never markup
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail_label.hide()
        self.details_button = QPushButton("Details")
        self.details_button.setCheckable(True)
        self.details_button.toggled.connect(self._show_details)
        self.details_button.hide()
        self.dismiss_button = QPushButton("Dismiss")
        self.dismiss_button.clicked.connect(self.dismiss)
        text = QVBoxLayout()
        text.addWidget(self.label)
        text.addWidget(self.detail_label)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 10, 6)
        row.addLayout(text, 1)
        row.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def set_theme(self, theme: Theme) -> None:
        self.setStyleSheet(
            f"#errorBanner {{ background: {theme.error_bg.name()};"
            f" border-bottom: 1px solid {theme.error_border.name()}; }}"
            f" #errorBanner QLabel {{ color: {theme.error_text.name()}; }}"
        )

    def show_error(self, text: str, detail: str = "") -> None:
        """`text` in plain words; `detail`, if any, is shown only when Details is pressed."""
        if text in self.messages:
            self.messages.remove(text)  # said again: moves to the bottom instead of repeating
        self.messages = [*self.messages, text][-MAX_MESSAGES:]
        if detail:
            self.details[text] = detail
        self.details = {m: d for m, d in self.details.items() if m in self.messages}
        self.label.setText("\n".join(self.messages))
        self.detail_label.setText("\n".join(self.details[m] for m in self.messages if m in self.details))
        self.details_button.setVisible(bool(self.details))
        self._show_details(self.details_button.isChecked())
        self.show()

    def _show_details(self, on: bool) -> None:
        self.details_button.setText("Hide details" if on else "Details")
        self.detail_label.setVisible(on and bool(self.details))

    def dismiss(self) -> None:
        self.messages, self.details = [], {}
        self.label.setText("")
        self.detail_label.setText("")
        self.details_button.setChecked(False)
        self.details_button.hide()
        self.hide()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""
