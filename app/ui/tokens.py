"""The UI's record of an answer: its text, which token produced each character, rejected drafts.

Spans are stored with the message as a compact string ("<chars><m|d|l><round>" per token, joined
by ";") so that highlighting survives a restart without a row per token.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from app.engine.decoding.events import Provenance, TokenEvent
from app.engine.store.conversations import clean_text

CODE = {Provenance.MAIN: "m", Provenance.DRAFT: "d", Provenance.LOOKUP: "l"}
FROM_CODE = {v: k for k, v in CODE.items()}
_ITEM = re.compile(r"(\d+)([mdl])(\d+)")


@dataclass(frozen=True, slots=True)
class TokenInfo:
    index: int
    provenance: Provenance
    round: int


@dataclass
class Answer:
    """Mutable, owned by the UI thread; grows as token batches arrive."""

    parts: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # char offset where each token starts
    provenance: list[Provenance] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)  # (token index it preceded, text)
    length: int = 0
    _encoded: list[str] = field(default_factory=list)

    def add(self, event: TokenEvent) -> str:
        text = clean_text(event.text)
        self.starts.append(self.length)
        self.parts.append(text)
        self.provenance.append(event.provenance)
        self.rounds.append(event.round)
        self.length += len(text)
        self._encoded.append(f"{len(text)}{CODE[event.provenance]}{event.round}")
        return text

    def add_tail(self, tail: str) -> None:
        """Text the detokenizer held back belongs to the last token."""
        tail = clean_text(tail)
        if not tail:
            return
        if not self.parts:
            self.add(TokenEvent(0, tail, Provenance.MAIN, 0.0, 0, 0))
            return
        self.parts[-1] += tail
        self.length += len(tail)
        self._encoded[-1] = f"{len(self.parts[-1])}{CODE[self.provenance[-1]]}{self.rounds[-1]}"

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def encoded(self) -> str:
        return ";".join(self._encoded)

    def token_at(self, offset: int) -> int:
        """Index of the token that produced character `offset` of the text."""
        return max(0, bisect.bisect_right(self.starts, offset) - 1)

    def info(self, index: int) -> TokenInfo:
        return TokenInfo(index, self.provenance[index], self.rounds[index])

    @classmethod
    def decode(cls, text: str, encoded: str, rejected: tuple[tuple[int, str], ...] = ()) -> Answer:
        """Rebuild from storage; a missing or inconsistent code falls back to one plain span."""
        answer = cls()
        pos = 0
        items = [_ITEM.fullmatch(x) for x in encoded.split(";")] if encoded else []
        if items and all(items) and sum(int(m.group(1)) for m in items) == len(text):  # type: ignore[union-attr]
            for i, m in enumerate(items):
                n = int(m.group(1))  # type: ignore[union-attr]
                answer.add(TokenEvent(0, text[pos : pos + n], FROM_CODE[m.group(2)], 0.0, int(m.group(3)), i))  # type: ignore[union-attr]
                pos += n
        elif text:
            answer.add(TokenEvent(0, text, Provenance.MAIN, 0.0, 0, 0))
        answer.rejected = list(rejected)
        return answer


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
