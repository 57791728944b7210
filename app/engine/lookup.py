"""Prompt-lookup drafting: propose what followed the latest earlier occurrence of the text's tail.

No model runs: an index from recent n-grams to where they last ended is kept up to date as the
conversation grows, so each round's lookup is a few dictionary probes. Chat answers often quote
the prompt (code edits, reformatting, lists), and there the proposals are nearly free tokens.
"""

from __future__ import annotations

from collections.abc import Iterable

MIN_NGRAM = 2
MAX_NGRAM = 4


class PromptLookup:
    """Longest-match n-gram lookup over one conversation's tokens (prompt and output)."""

    def __init__(
        self, tokens: Iterable[int] = (), *, min_ngram: int = MIN_NGRAM, max_ngram: int = MAX_NGRAM
    ) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError("need 1 ≤ min_ngram ≤ max_ngram")
        self.min_ngram, self.max_ngram = min_ngram, max_ngram
        self.tokens: list[int] = []
        # n-gram -> index just past its latest occurrence that is not the text's own tail
        self._ends: dict[tuple[int, ...], int] = {}
        self.extend(tokens)

    def extend(self, tokens: Iterable[int]) -> None:
        for token in tokens:
            self._index_tail()
            self.tokens.append(token)

    def _index_tail(self) -> None:
        """Register the n-grams ending at the current last token: a continuation now follows."""
        end = len(self.tokens)
        for n in range(self.min_ngram, min(self.max_ngram, end) + 1):
            self._ends[tuple(self.tokens[end - n : end])] = end

    def propose(self, limit: int) -> tuple[list[int], int]:
        """Up to `limit` tokens that followed the longest matching tail, and the match length."""
        if limit < 1:
            return [], 0
        end = len(self.tokens)
        for n in range(min(self.max_ngram, end), self.min_ngram - 1, -1):
            at = self._ends.get(tuple(self.tokens[end - n :]))
            if at is not None:
                return self.tokens[at : at + limit], n
        return [], 0
