"""First run with no models: recommended pairs, Import GGUF…, Add a folder…."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app import PRODUCT_NAME
from app.engine.library.recommended import RECOMMENDED, RecommendedPair
from app.ui.picker import human_bytes


class WelcomePanel(QWidget):
    download = Signal(object)  # RecommendedPair
    import_gguf = Signal()
    add_folder = Signal()
    choose = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        title = QLabel(f"<h1>Welcome to {PRODUCT_NAME}</h1>")
        intro = QLabel(
            "No models were found on this Mac. SpecChat pairs a large <b>main</b> model with a small "
            "<b>draft</b> model that guesses ahead; the main checks the guesses, so answers are identical "
            "and arrive faster. Start with one of these pairs:"
        )
        intro.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(48, 36, 48, 36)
        layout.addWidget(title)
        layout.addWidget(intro)
        self.buttons: list[QPushButton] = []
        for pair in RECOMMENDED:
            layout.addWidget(self._card(pair))
        row = QHBoxLayout()
        for text, signal in (
            ("Import GGUF…", self.import_gguf),
            ("Add a folder…", self.add_folder),
            ("Choose models…", self.choose),
        ):
            button = QPushButton(text)
            button.clicked.connect(signal)
            row.addWidget(button)
        row.addStretch(1)
        layout.addLayout(row)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        layout.addStretch(1)

    def _card(self, pair: RecommendedPair) -> QFrame:
        card = QFrame()
        card.setFrameShape(QFrame.Shape.StyledPanel)
        row = QHBoxLayout(card)
        text = QLabel(
            f"<b>{pair.title}</b><br><span style='color:gray'>{pair.main_repo}<br>{pair.draft_repo}</span>"
        )
        text.setTextFormat(Qt.TextFormat.RichText)
        button = QPushButton(f"Download ({human_bytes(pair.download_bytes)})")
        button.clicked.connect(lambda _=False, p=pair: self.download.emit(p))
        self.buttons.append(button)
        row.addWidget(text, 1)
        row.addWidget(button)
        return card
