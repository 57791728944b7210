"""What the chat pane says when there is nothing to show yet, always with the next step.

- models found but none loaded: "Choose models…";
- models loaded, no conversation yet: a hint about what to type and what the colours mean;
- a saved conversation: the conversation itself, with or without a model loaded;
- a message sent with no models loaded: a bar over the composer (the text stays in the box).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.ui.common.theme import SPACE, Theme, current_theme, scaled

if TYPE_CHECKING:
    from app.ui.chat.chat_controller import ChatController

CARD_WIDTH, PADDING = 65 * SPACE, 3 * SPACE
WELCOME = "welcome"
NO_PAIR = "no_pair"
LOADING = "loading"
NEW_CHAT = "new_chat"
TEXTS = {
    NO_PAIR: (
        "Choose your models",
        "Your models are ready. Pick a main model, and a smaller draft model that guesses ahead "
        "so answers arrive faster.",
    ),
    LOADING: (
        "Loading the models…",
        "Small models load in seconds; large ones can take minutes on a slower computer. The time "
        "so far shows below. Type your message meanwhile and send it once they are loaded.",
    ),
    NEW_CHAT: (
        "Start a conversation",
        "Type a message below and press Enter. Words tinted green came from the draft model, "
        "blue from your own prompt; the answer is the same as without them, only faster.",
    ),
}


def pane_state(has_models: bool, chat: ChatController) -> str | None:
    """Which empty state the chat pane shows (None: the transcript). A saved conversation is
    shown whether or not a model is loaded: reading it needs none."""
    if len(chat.transcript):
        return None
    if chat.pair is not None:
        return NEW_CHAT
    if chat.load_request is not None:
        return LOADING
    return NO_PAIR if has_models else WELCOME


class EmptyChat(QWidget):
    """A centred card: a title, what to do next and, where there is one, the button that does it."""

    choose = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("emptyChat")
        self.state = NO_PAIR
        self.card = QFrame()
        self.card.setObjectName("emptyCard")
        self.card.setFixedWidth(CARD_WIDTH)
        self.title = QLabel()
        self.title.setObjectName("emptyTitle")
        self.body = QLabel()
        # Sizes set as fonts, not in the style sheet, so a wrapped label measures its height right.
        self.title.setFont(scaled(self.title.font(), "title", QFont.Weight.DemiBold))
        self.body.setFont(scaled(self.body.font(), "lead"))
        self.body.setWordWrap(True)
        self.button = QPushButton("Choose models…")
        self.button.setDefault(True)
        self.button.clicked.connect(self.choose)
        inner = QVBoxLayout(self.card)
        inner.setContentsMargins(PADDING, 3 * SPACE, PADDING, 3 * SPACE)
        inner.setSpacing(int(1.5 * SPACE))
        inner.addWidget(self.title)
        inner.addWidget(self.body)
        inner.addWidget(self.button, 0, Qt.AlignmentFlag.AlignLeft)
        # Centred by stretches, not an alignment flag: an aligned widget gets no height for its
        # width, and the wrapped text would be cut.
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.card)
        row.addStretch(1)
        outer = QVBoxLayout(self)
        outer.addStretch(1)
        outer.addLayout(row)
        outer.addStretch(2)
        self.set_theme(current_theme())
        self.show_state(NO_PAIR)

    def show_state(self, state: str | None) -> None:
        if state not in TEXTS:
            return  # the transcript or the welcome panel is shown instead
        self.state = state
        title, body = TEXTS[state]
        self.title.setText(title)
        self.body.setText(body)
        # The card has a fixed width, so the wrapped text's height is known now; waiting for the
        # layout's height-for-width pass left the text cut when the state changed while hidden.
        width = CARD_WIDTH - 2 * PADDING
        flags = int(Qt.AlignmentFlag.AlignLeft) | int(Qt.TextFlag.TextWordWrap)
        self.body.setMinimumHeight(
            self.body.fontMetrics().boundingRect(0, 0, width, 10_000, flags, body).height()
        )
        self.button.setVisible(state == NO_PAIR)

    def set_theme(self, theme: Theme) -> None:
        self.setStyleSheet(
            f"#emptyChat {{ background: {theme.base.name()}; }}"
            f" #emptyCard {{ background: {theme.card.name()}; border: 1px solid {theme.border.name()};"
            " border-radius: 12px; }"
            f" #emptyCard QLabel {{ color: {theme.muted.name()}; }}"
            f" #emptyCard QLabel#emptyTitle {{ color: {theme.text.name()}; }}"
        )


class NeedModelsBar(QFrame):
    """Shown over the composer when a message is sent before any model is loaded."""

    choose = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("needModels")
        self.label = QLabel(
            "Choose the models to answer with first. Your message is kept: send it again once they are loaded."
        )
        self.label.setWordWrap(True)
        self.button = QPushButton("Choose models…")
        self.button.clicked.connect(self.choose)
        row = QHBoxLayout(self)
        row.setContentsMargins(int(1.5 * SPACE), SPACE, int(1.5 * SPACE), SPACE)
        row.addWidget(self.label, 1)
        row.addWidget(self.button)
        self.set_theme(current_theme())
        self.hide()

    def set_theme(self, theme: Theme) -> None:
        self.setStyleSheet(
            f"#needModels {{ background: {theme.warning_bg.name()};"
            f" border-top: 1px solid {theme.border.name()}; }}"
            f" #needModels QLabel {{ color: {theme.warning_text.name()}; }}"
        )
