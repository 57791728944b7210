"""Turn generated token ids into text one token at a time, without splitting characters.

Byte-level tokens can end in the middle of a UTF-8 character; decoding them alone yields
U+FFFD. We decode only a short window (the previous segment as context plus the pending
tokens), emit the stable part and hold back a trailing U+FFFD until the character completes,
so the segments always concatenate to exactly `tokenizer.decode(all_ids)`.
"""

from __future__ import annotations

from typing import Any

REPLACEMENT = "\ufffd"


class StreamingDetokenizer:
    """Incremental decoder: `add()` returns the new text (maybe ""), `finish()` the rest."""

    def __init__(self, tokenizer: Any, *, skip_special_tokens: bool = False) -> None:
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        self.reset()

    def reset(self) -> None:
        """Forget all tokens, ready for a new answer."""
        self._ids: list[int] = []
        self._prefix = 0  # window start: context tokens whose text was already emitted
        self._read = 0  # tokens before this index are fully emitted at a clean boundary
        self._prefix_len = 0  # len(decode(ids[prefix:read]))
        self._emitted = 0  # chars emitted past the context since `read`

    @property
    def ids(self) -> list[int]:
        """All tokens added since the last reset."""
        return list(self._ids)

    def add(self, token_id: int) -> str:
        """Add one token; return the text it completes ("" while a character is unfinished)."""
        self._ids.append(int(token_id))
        text = self._decode(self._ids[self._prefix :])
        stable = text.rstrip(REPLACEMENT)
        start = self._prefix_len + self._emitted
        segment = stable[start:] if len(stable) > start else ""
        self._emitted += len(segment)
        if len(stable) == len(text):  # clean boundary: slide the window forward
            self._prefix = self._read
            self._read = len(self._ids)
            self._prefix_len = len(self._decode(self._ids[self._prefix : self._read]))
            self._emitted = 0
        return segment

    def finish(self) -> str:
        """Return whatever is still held back (a genuinely broken character shows as U+FFFD)."""
        text = self._decode(self._ids[self._prefix :])
        segment = text[self._prefix_len + self._emitted :]
        self._emitted += len(segment)
        return segment

    def _decode(self, ids: list[int]) -> str:
        if not ids:
            return ""
        text: str = self._tokenizer.decode(ids, skip_special_tokens=self._skip)
        return text
