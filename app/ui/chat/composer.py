"""Where the user types: Enter sends, Shift+Enter breaks the line, Esc (or Stop) cancels."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.ui.chat.settings_dialog import preset_combo, show_preset
from app.ui.chat.text.long_text import (
    BOX_PREVIEW_CHARS,
    BOX_PREVIEW_LINES,
    Kept,
    is_long,
    keep,
    long_notice,
    pasted_text,
    preview,
)
from app.ui.chat.text.wrapping import has_long_run, wrap_anywhere


class _Editor(QPlainTextEdit):
    """Edits text up to app.ui.chat.text.long_text's EDITABLE size; longer text (a paste, a restored draft)
    is kept whole in `long` while the box shows its start, read-only (app.ui.chat.text.long_text)."""

    submit = Signal()
    escape = Signal()
    long_changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.long: Kept | None = None

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

    def toPlainText(self) -> str:
        """The whole text, also while the box shows only its start."""
        return self.long.text if self.long is not None else super().toPlainText()

    def insertFromMimeData(self, source: QMimeData) -> None:
        """A paste reads at most what is kept; one that makes the text long shows its start."""
        if not source.hasText():
            super().insertFromMimeData(source)
            return
        pasted = pasted_text(source)
        if self.long is not None:  # the box is read-only then: only a direct call gets here
            before, after = self.long.text, ""
        else:
            cursor, typed = self.textCursor(), super().toPlainText()
            before, after = typed[: cursor.selectionStart()], typed[cursor.selectionEnd() :]
            if not pasted.cut and not is_long(before + pasted.text + after):
                if has_long_run(
                    pasted.text
                ):  # a run without spaces wraps anywhere (app.ui.chat.text.wrapping)
                    wrap_anywhere(self, True)
                self.insertPlainText(pasted.text)
                return
        joined = keep(before + pasted.text + after)
        self._show_long(Kept(joined.text, pasted.cut or joined.cut))

    def setPlainText(self, text: str) -> None:
        kept = keep(text)
        if is_long(kept.text):
            self._show_long(kept)
            return
        self._leave_long()
        self._lay_out(kept.text)

    def clear(self) -> None:
        self._leave_long()
        super().clear()
        wrap_anywhere(self, False)

    def _lay_out(self, text: str) -> None:
        """Set the text, in the wrapping it needs; the view switches while it holds the text that
        is cheap to lay out either way, never a long run under word wrapping."""
        if has_long_run(text):
            wrap_anywhere(self, True)
            super().setPlainText(text)
        else:
            super().setPlainText(text)
            wrap_anywhere(self, False)

    def _show_long(self, kept: Kept) -> None:
        self.long = kept
        self.setReadOnly(True)
        self._lay_out(preview(kept.text, BOX_PREVIEW_CHARS, BOX_PREVIEW_LINES) + " …")
        self.long_changed.emit()

    def _leave_long(self) -> None:
        if self.long is not None:
            self.long = None
            self.setReadOnly(False)
            self.long_changed.emit()


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
        self.long_note = QLabel("")
        self.long_note.setWordWrap(True)
        self.remove = QPushButton("Remove")
        self.remove.setToolTip("Take the long text out of the message box")
        self.long_bar = QWidget()
        bar = QHBoxLayout(self.long_bar)
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.long_note, 1)
        bar.addWidget(self.remove)
        self.long_bar.setVisible(False)
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
        layout.addWidget(self.long_bar)
        layout.addLayout(row)
        self.busy = False
        self.editor.submit.connect(self._submit)
        self.editor.escape.connect(self._escape)
        self.button.clicked.connect(lambda: self.stop.emit() if self.busy else self._submit())
        self.preset.activated.connect(lambda _i: self.preset_chosen.emit(self.preset.currentText()))
        self.editor.long_changed.connect(self._show_long_note)
        self.remove.clicked.connect(self.editor.clear)

    def show_preset(self, name: str) -> None:
        """Show the active conversation's preset ("Custom" when its values were set by hand)."""
        show_preset(self.preset, name)

    def set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.button.setText("Stop" if busy else "Send")

    def set_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def _show_long_note(self) -> None:
        long = self.editor.long
        self.long_note.setText(long_notice(long) if long is not None else "")
        self.long_bar.setVisible(long is not None)

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
        elif self.editor.long is not None:
            self.editor.clear()
        else:  # nothing here to clear: whatever the window is doing stops (a load, an edit)
            self.stop.emit()
