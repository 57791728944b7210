"""The chat's changes to a conversation: committed to the database first, then shown.

Each operation writes its rows in one transaction and only once that has committed applies the
same change to the `Transcript` the chat view draws, returning the turn that changed (as Anki's
collection operations return what changed). A write that fails raises its own error and leaves
the transcript as it was, so what is shown is always what the database holds. The text is cleaned
once, by the store as it writes it; the transcript takes the text the store wrote.

The one change shown before it is stored is the answer as it streams: the user reads it as it
grows. If its save fails it stays on screen and is owed: the next operation writes it first, in
its own transaction, so nothing after it is stored while it is not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from app.engine.store.conversations import ConversationStore
from app.engine.store.transcript import AnswerTurn, MessageState, Role, Transcript, UserTurn

TITLE_CHARS = 48


def _title(text: str) -> str:
    """A new chat's title: the first words of its first question, whole words only, with an
    ellipsis where it goes on (a long paste: its first words)."""
    words = " ".join(text[:1000].split())
    if len(words) <= TITLE_CHARS:
        return words or "New chat"
    cut = words[: TITLE_CHARS + 1].rsplit(" ", 1)[0] if " " in words[:TITLE_CHARS] else words[:TITLE_CHARS]
    return cut.rstrip(" ,.;:") + "…"


class ChatLog:
    """One conversation as stored and as shown; the store decides, the transcript follows."""

    def __init__(self, store: ConversationStore, transcript: Transcript | None = None) -> None:
        self.store = store
        self.transcript = transcript if transcript is not None else Transcript()
        self.owed: AnswerTurn | None = None  # an answer on screen whose last save failed

    def save_answer(self, turn: AnswerTurn) -> None:
        """Write the streaming answer as it is shown; on failure it is owed and the error raised."""
        self.owed = turn
        self.store.save_answer(turn)
        self.owed = None

    def catch_up(self) -> None:
        """Write an owed answer that is still shown; raises (and it stays owed) if it still fails."""
        with self._writing():
            pass

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One operation's transaction, an owed answer written first; it is owed no more only once
        the whole transaction has committed."""
        owed = self.owed
        with self.store.transaction():
            if owed is not None and self.transcript.find(owed.key) is owed:
                self.store.save_answer(owed)
            yield
        if self.owed is owed:
            self.owed = None

    def ask(
        self,
        conversation: int | None,
        text: str,
        *,
        system_prompt: str = "",
        settings: dict[str, Any] | None = None,
        also: Callable[[], None] = lambda: None,
    ) -> tuple[int, UserTurn]:
        """Add the user's turn, creating the conversation when `conversation` is None; `also`
        runs in the same transaction (the draft's removal). Returns the conversation and turn."""
        with self._writing():
            if conversation is None:
                conversation = self.store.create(_title(text), system_prompt, settings)
            key, stored = self.store.append_text(conversation, Role.USER, text)
            also()
        return conversation, self.transcript.append_user(key, stored)

    def edit(
        self, conversation: int, key: int, text: str, *, also: Callable[[], None] = lambda: None
    ) -> UserTurn:
        """Replace the user turn `key` and drop every turn after it, together."""
        before = self.transcript.find(key)
        first = next((t for t in self.transcript if isinstance(t, UserTurn)), None)
        with self._writing():
            stored = self.store.edit(key, text)
            self.store.truncate_after_message(conversation, key)
            # a title made from the first question follows its edit; one the user chose stays
            if first is not None and first is before and self.store.title(conversation) == _title(first.text):
                self.store.rename(conversation, _title(text))
            also()
        self.transcript.edit(key, stored)
        turn = self.transcript.find(key)
        assert isinstance(turn, UserTurn)  # edit() raised otherwise
        return turn

    def start_answer(self, conversation: int) -> AnswerTurn:
        """An empty answer after the last turn, saved as partial until it finishes."""
        with self._writing():
            key, _ = self.store.append_text(conversation, Role.ASSISTANT, "", MessageState.PARTIAL)
        return self.transcript.start_answer(key)

    def regenerate(self, conversation: int, key: int | None = None) -> AnswerTurn | None:
        """Drop the answer `key` (None: the last turn) and what follows the question it answered,
        and start the new answer in its place, together; None when there is no question to ask
        again. The earlier answer stays, shown and stored, if this cannot be saved."""
        question = self.transcript.question_before(key)
        if question is None:
            return None
        with self._writing():
            self.store.truncate_after_message(conversation, question.key)
            answer, _ = self.store.append_text(conversation, Role.ASSISTANT, "", MessageState.PARTIAL)
        self.transcript.drop_after(question.key)
        return self.transcript.start_answer(answer)
