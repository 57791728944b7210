"""Where the user types: Enter sends, Shift+Enter breaks the line, Esc (or Stop) cancels."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.ui.settings_dialog import preset_combo, show_preset
from app.ui.wrapping import has_long_run, wrap_anywhere


class _Editor(QPlainTextEdit):
    submit = Signal()
    escape = Signal()

    def keyPressEvent(self, e: QKeyEvent) -> None:
        if (
            e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
            and not e.modifiers() & Qt.KeyboardModifier.ShiftModifier
        ):
            self.submit.emit()
            return
        if e.key() == Qt.Key.Key_Escape:
            self.escape.emit()
            return
        super().keyPressEvent(e)

    # A paste or restored text with a long run of no spaces wraps anywhere (app.ui.wrapping).
    def insertFromMimeData(self, source: QMimeData) -> None:
        if source.hasText() and has_long_run(source.text()):
            wrap_anywhere(self, True)
        super().insertFromMimeData(source)

    def setPlainText(self, text: str) -> None:
        wrap_anywhere(self, has_long_run(text))
        super().setPlainText(text)

    def clear(self) -> None:
        super().clear()
        wrap_anywhere(self, False)


class Composer(QWidget):
    send = Signal(str)
    stop = Signal()
    preset_chosen = Signal(str)  # a preset's name, picked from the combo next to Send

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.editor = _Editor()
        self.editor.setPlaceholderText(
            "Message the model…  (Enter sends, Shift+Enter for a new line, Esc stops)"
        )
        self.editor.setFixedHeight(76)
        self.button = QPushButton("Send")
        self.button.setMinimumWidth(80)
        self.preset = preset_combo()
        self.preset.setToolTip(
            "How this conversation's answers are sampled (Conversation settings shows the values)"
        )
        self.preset.setAccessibleName("Sampling preset")
        self.note = QLabel("")
        self.note.setVisible(False)
        chooser = QHBoxLayout()
        chooser.addWidget(QLabel("Preset"))
        chooser.addWidget(self.preset)
        side = QVBoxLayout()
        side.addWidget(self.button)
        side.addLayout(chooser)
        row = QHBoxLayout()
        row.addWidget(self.editor, 1)
        row.addLayout(side)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        layout.addWidget(self.note)
        layout.addLayout(row)
        self.busy = False
        self.editor.submit.connect(self._submit)
        self.editor.escape.connect(self._escape)
        self.button.clicked.connect(lambda: self.stop.emit() if self.busy else self._submit())
        self.preset.activated.connect(lambda _i: self.preset_chosen.emit(self.preset.currentText()))

    def show_preset(self, name: str) -> None:
        """Show the active conversation's preset ("Custom" when its values were set by hand)."""
        show_preset(self.preset, name)

    def set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.button.setText("Stop" if busy else "Send")

    def set_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def _submit(self) -> None:
        text = self.editor.toPlainText()
        if self.busy or not text.strip():
            return
        self.send.emit(text)  # the text stays until the turn is saved (ChatActions._send clears it)

    def _escape(self) -> None:
        if self.busy:
            self.stop.emit()
        elif self.note.isVisible():
            self.set_note("")
            self.editor.clear()
            self.stop.emit()
