"""Streaming an answer into its token record (app.engine.store.provenance.Answer, which also
holds the storage codec), a round at a time."""

from __future__ import annotations

from app.engine.decoding.events import TokenEvent
from app.engine.decoding.text.clean import clean_text
from app.engine.store.provenance import Answer


class Assembler:
    """Turns a generation's events into paintable tokens, holding each round's tokens until its
    RoundEvent says which drafts were refused (that event follows the round's tokens)."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.ready = len(answer.parts)  # tokens whose round is complete
        self._round_start = len(answer.parts)

    def token(self, event: TokenEvent) -> None:
        if len(self.answer.parts) == self.ready:
            self._round_start = self.ready
        self.answer.add(event)

    def round(self, accepted: int, refused_text: str) -> None:
        """`refused_text`: the round's refused drafts, decoded by the engine ("" when none)."""
        text = clean_text(refused_text)
        if text:
            at = min(self._round_start + accepted, len(self.answer.parts))
            self.answer.rejected.append((at, text))
        self.ready = len(self.answer.parts)

    def flush(self) -> None:
        self.ready = len(self.answer.parts)
