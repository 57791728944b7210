"""Help ▸ About: the version, and which math library MLX runs on (it sets CPU speed on Linux)."""

from __future__ import annotations

from html import escape

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from app import PRODUCT_NAME, __version__


class AboutDialog(QDialog):
    """`blas` and `advice` are plain strings from the engine, so this module needs no MLX."""

    def __init__(self, blas: str, advice: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"About {PRODUCT_NAME}")
        lines = [
            f"<p><b>{PRODUCT_NAME} {escape(__version__)}</b><br>"
            "Local chat with speculative decoding, made visible.</p>",
            f"<p>Matrix maths (BLAS): {escape(blas)}</p>",
        ]
        if advice:
            lines.append(f"<p>{escape(advice)}</p>")
        self.text = QLabel("".join(lines))
        self.text.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addWidget(buttons)
        self.resize(480, self.sizeHint().height())
