"""First run with no models: recommended pairs, Import GGUF…, Add a folder…."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app import PRODUCT_NAME
from app.engine.library.recommended import RecommendedPair, recommended_pairs
from app.ui.common.platform_words import this_machine
from app.ui.common.theme import SPACE, Theme, current_theme, scaled
from app.ui.library.download_panel import human_bytes


class WelcomePanel(QWidget):
    download = Signal(object)  # RecommendedPair
    import_gguf = Signal()
    add_folder = Signal()
    choose = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        title = QLabel(f"Welcome to {PRODUCT_NAME}")
        title.setFont(scaled(title.font(), "title", QFont.Weight.DemiBold))
        intro = QLabel(
            f"No models were found on {this_machine()}. SpecChat pairs a large <b>main</b> model with a small "
            "<b>draft</b> model that guesses ahead; the main checks the guesses, so answers are identical "
            "and arrive faster. Start with one of these pairs:"
        )
        intro.setWordWrap(True)
        intro.setFont(scaled(intro.font(), "lead"))
        self.intro = intro
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6 * SPACE, 4 * SPACE, 6 * SPACE, 4 * SPACE)
        layout.setSpacing(int(1.5 * SPACE))
        layout.addWidget(title)
        layout.addWidget(intro)
        self.buttons: list[QPushButton] = []
        self.cards: list[tuple[QLabel, RecommendedPair]] = []
        for pair in recommended_pairs():
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
        self.set_theme(current_theme())

    def set_theme(self, theme: Theme) -> None:
        """Cards raised on the window's background; repository names in the muted colour."""
        self.setStyleSheet(
            f"#pairCard {{ background: {theme.card.name()}; border: 1px solid {theme.border.name()};"
            " border-radius: 10px; }"
        )
        for label, pair in self.cards:
            label.setText(
                f"<b>{pair.title}</b><br><span style='color:{theme.muted.name()}'>"
                f"{pair.main_repo}<br>{pair.draft_repo}</span>"
            )

    def _card(self, pair: RecommendedPair) -> QFrame:
        card = QFrame()
        card.setObjectName("pairCard")
        row = QHBoxLayout(card)
        row.setContentsMargins(2 * SPACE, int(1.5 * SPACE), 2 * SPACE, int(1.5 * SPACE))
        text = QLabel()
        self.cards.append((text, pair))
        text.setTextFormat(Qt.TextFormat.RichText)
        button = QPushButton(f"Download ({human_bytes(pair.download_bytes)})")
        button.clicked.connect(lambda _=False, p=pair: self.download.emit(p))
        self.buttons.append(button)
        row.addWidget(text, 1)
        row.addWidget(button)
        return card
