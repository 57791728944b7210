"""The main window. For now a frame: the chat view, picker and dashboard arrive in later work."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLabel, QMainWindow

from app import PRODUCT_NAME, __version__


class MainWindow(QMainWindow):
    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle(PRODUCT_NAME)
        placeholder = QLabel(
            f"<h2>{PRODUCT_NAME} {__version__}</h2>"
            "<p>Speculative decoding, made visible.</p>"
            "<p>Try the engine from a terminal:<br><code>python -m app toy-models /tmp/toy</code><br>"
            "<code>python -m app generate --main /tmp/toy/main --draft /tmp/toy/draft \"Hello\"</code></p>"
        )
        placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        placeholder.setTextFormat(Qt.TextFormat.RichText)
        self.setCentralWidget(placeholder)
        quit_action = QAction("&Quit", self)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(self.close)
        self.menuBar().addMenu("&File").addAction(quit_action)
