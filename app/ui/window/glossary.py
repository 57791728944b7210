"""Help ▸ Glossary: every term on screen in a sentence a newcomer understands."""

from __future__ import annotations

from html import escape

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

from app.ui.common.stats_words import GLOSSARY


class GlossaryDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Glossary")
        self.resize(560, 520)
        self.text = QTextBrowser()
        self.text.setHtml(
            "".join(f"<p><b>{escape(term)}</b><br>{escape(meaning)}</p>" for term, meaning in GLOSSARY)
        )
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addWidget(buttons)
