"""Turn generated token ids into text one token at a time, without splitting characters.

Byte-level tokens can end in the middle of a UTF-8 character; decoding them alone yields
U+FFFD. We decode only a short window (the previous segment as context plus the pending
tokens), emit the stable part and hold back a trailing U+FFFD until the character completes,
so the segments always concatenate to exactly `tokenizer.decode(all_ids)`.

A run of bytes that never completes a character would keep the window from sliding and make
every `add` re-decode the whole run. A character is at most 4 bytes and a token carries at
least one, so an unfinished character lies within the last `_IN_PROGRESS` byte-carrying
tokens: once more are pending, everything before them is final and the window slides past it.
"""

from __future__ import annotations

from typing import Any

REPLACEMENT = "\ufffd"
_IN_PROGRESS = 3  # an unfinished character has at most 3 bytes, so at most 3 tokens


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
        elif len(self._ids) - self._read > _IN_PROGRESS:
            segment += self._flush_final(text)
        return segment

    def finish(self) -> str:
        """Return whatever is still held back (a genuinely broken character shows as U+FFFD)."""
        text = self._decode(self._ids[self._prefix :])
        segment = text[self._prefix_len + self._emitted :]
        self._emitted += len(segment)
        return segment

    def _flush_final(self, text: str) -> str:
        """Emit what precedes the last few byte-carrying tokens and slide the window past it.

        `text` is the window's decoded text. The split is taken only where decoding both halves
        gives `text` back, i.e. no character straddles it, so the stream still equals decode().
        """
        split = len(self._ids)
        carrying = 0
        while carrying < _IN_PROGRESS and split > self._read:
            split -= 1
            # A token that decodes to nothing (a skipped special token) carries no byte.
            carrying += bool(self._decode(self._ids[split : split + 1]))
        if carrying < _IN_PROGRESS or split <= self._read:
            return ""
        head = self._decode(self._ids[self._prefix : split])
        if head + self._decode(self._ids[split:]) != text:
            return ""
        done = self._prefix_len + self._emitted
        segment = head[done:]
        self._prefix = self._read
        self._read = split
        self._prefix_len = len(self._decode(self._ids[self._prefix : split]))
        self._emitted = max(0, done - len(head))
        return segment

    def _decode(self, ids: list[int]) -> str:
        if not ids:
            return ""
        text: str = self._tokenizer.decode(ids, skip_special_tokens=self._skip)
        return text
