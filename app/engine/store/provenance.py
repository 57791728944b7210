"""An answer's text with who produced each token: the main model, an accepted draft or a prompt
lookup, and the drafts the main model refused.

Spans are stored with the message as a compact string ("<chars><m|d|l><round>" per token, joined
by ";") so that highlighting survives a restart without a row per token.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Protocol

from app.engine.decoding.events import Provenance
from app.engine.decoding.text.clean import clean_text

CODE = {Provenance.MAIN: "m", Provenance.DRAFT: "d", Provenance.LOOKUP: "l"}
FROM_CODE = {v: k for k, v in CODE.items()}
_ITEM = re.compile(r"(\d+)([mdl])(\d+)")
CODE_CHUNK = 512  # tokens whose codes are joined into one kept string


class Token(Protocol):
    """What an emitted token tells the record (the engine's TokenEvent has it)."""

    @property
    def text(self) -> str: ...
    @property
    def provenance(self) -> Provenance: ...
    @property
    def round(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Piece:
    text: str
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
    # the codes of tokens [0, _coded), a string per CODE_CHUNK tokens: a string per token held
    # ~60 bytes each for as long as the answer
    _codes: list[str] = field(default_factory=list, compare=False, repr=False)
    _coded: int = field(default=0, compare=False, repr=False)

    def add(self, token: Token) -> str:
        text = clean_text(token.text)
        self.starts.append(self.length)
        self.parts.append(text)
        self.provenance.append(token.provenance)
        self.rounds.append(token.round)
        self.length += len(text)
        return text

    def add_tail(self, tail: str) -> None:
        """Text the detokenizer held back belongs to the last token."""
        tail = clean_text(tail)
        if not tail:
            return
        if not self.parts:
            self.add(Piece(tail, Provenance.MAIN, 0))
            return
        self.parts[-1] += tail
        self.length += len(tail)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def _code(self, i: int) -> str:
        return f"{len(self.parts[i])}{CODE[self.provenance[i]]}{self.rounds[i]}"

    def encoded(self) -> str:
        """The spans' codes; whole chunks are joined once and kept. The last token's code can
        still change (`add_tail`), so it never joins a chunk."""
        while self._coded + CODE_CHUNK < len(self.parts):
            end = self._coded + CODE_CHUNK
            self._codes.append(";".join(self._code(i) for i in range(self._coded, end)))
            self._coded = end
        return ";".join([*self._codes, *(self._code(i) for i in range(self._coded, len(self.parts)))])

    def token_at(self, offset: int) -> int:
        """Index of the token that produced character `offset` of the text."""
        return max(0, bisect.bisect_right(self.starts, offset) - 1)

    @classmethod
    def decode(cls, text: str, encoded: str, rejected: tuple[tuple[int, str], ...] = ()) -> Answer:
        """Rebuild from storage; a missing or inconsistent code falls back to one plain span."""
        answer = cls()
        matches = [_ITEM.fullmatch(x) for x in encoded.split(";")] if encoded else []
        items = [m for m in matches if m is not None]
        if items and len(items) == len(matches) and sum(int(m.group(1)) for m in items) == len(text):
            pos = 0
            for m in items:
                n = int(m.group(1))
                answer.add(Piece(text[pos : pos + n], FROM_CODE[m.group(2)], int(m.group(3))))
                pos += n
        elif text:
            answer.add(Piece(text, Provenance.MAIN, 0))
        answer.rejected = list(rejected)
        return answer
