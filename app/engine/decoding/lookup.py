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


class ShadowTrials:
    """Unused lookup proposals scored against the text as it is written, so that lookup's
    acceptance is learnt while it is not played. A proposal is a trial once its first miss (or
    its last token) is known, which may take several rounds: judging only what one plain round
    emitted would see position 0 alone and credit deep positions with position 0's rate, and
    long lookup drafts would look better than they are."""

    def __init__(self, keep: int = 32) -> None:
        self.keep = keep
        self._open: list[tuple[tuple[int, ...], int]] = []  # (candidates, matched so far)

    def offer(self, candidates: tuple[int, ...]) -> None:
        if candidates:
            self._open.append((candidates, 0))

    def follow(self, emitted: Iterable[int]) -> list[tuple[int, int]]:
        """Advance every open proposal over `emitted`; the (length, matched) of those decided."""
        emitted = tuple(emitted)
        decided, still_open = [], []
        for candidates, matched in self._open:
            done = False
            for token in emitted:
                if candidates[matched] != token:
                    done = True
                    break
                matched += 1
                if matched == len(candidates):
                    done = True
                    break
            if done:
                decided.append((len(candidates), matched))
            else:
                still_open.append((candidates, matched))
        self._open = still_open[-self.keep :]
        return decided

    def clear(self) -> None:
        self._open = []
