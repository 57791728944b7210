"""Draft-length policies: the loop asks one each round how many tokens to draft.

This is the seam for the adaptive controller: a policy sees every finished round and may change
its mind; k == 0 means a plain decoding step with no draft work at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from app.engine.events import RoundEvent

MAX_DRAFT = 16


@dataclass(frozen=True, slots=True)
class RoundContext:
    """What the loop knows before a round."""

    has_draft: bool
    remaining: int  # tokens still allowed in this answer
    position: int  # tokens emitted so far in this answer


class DraftPolicy(Protocol):
    def choose(self, context: RoundContext) -> int: ...

    def observe(self, event: RoundEvent) -> None: ...

    def snapshot(self) -> dict[str, object]: ...


class FixedDraftLength:
    """Always drafts k tokens when a draft is available."""

    def __init__(self, k: int) -> None:
        if not 1 <= k <= MAX_DRAFT:
            raise ValueError(f"draft length must be between 1 and {MAX_DRAFT}, got {k}")
        self.k = k

    def choose(self, context: RoundContext) -> int:
        return self.k if context.has_draft else 0

    def observe(self, event: RoundEvent) -> None:
        pass

    def snapshot(self) -> dict[str, object]:
        return {"policy": "fixed", "k": self.k}


class PlainDecoding:
    """Never drafts: the baseline, run through the same loop as speculation."""

    def choose(self, context: RoundContext) -> int:
        return 0

    def observe(self, event: RoundEvent) -> None:
        pass

    def snapshot(self) -> dict[str, object]:
        return {"policy": "plain"}
