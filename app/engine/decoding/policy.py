"""Draft-length policies: the loop asks one each round how many tokens to draft.

A policy sees every finished round and may change its mind; k == 0 means a plain decoding step
with no draft work at all. `choose` may return a bare k (drafted by the draft model) or a
`DraftPlan` naming the source, so prompt lookup can stand in for the draft model.

`DraftPolicy` is everything the loop asks of a policy; `PolicyDefaults` answers all of it but
`choose` and `decision` for a policy that learns nothing and never looks ahead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from app.engine.decoding.events import Decision, Provenance, Reason, RoundEvent

MAX_DRAFT = 16


@dataclass(frozen=True, slots=True)
class RoundContext:
    """What the loop knows before a round."""

    has_draft: bool
    remaining: int  # tokens still allowed in this answer
    position: int  # tokens emitted so far in this answer
    lookup_len: int = 0  # tokens prompt lookup could propose this round (0: no match)
    lookup: tuple[int, ...] = ()  # those tokens, so a policy can score lookup without using it


@dataclass(frozen=True, slots=True)
class DraftPlan:
    """k tokens from `source` (DRAFT or LOOKUP); k == 0 is a plain step whatever the source.

    `read_limit`: of the tokens a bypassed draft has not read, read only the last this many
    and skip the rest (a probe priced where reading costs a share of a step per token)."""

    k: int
    source: Provenance = Provenance.DRAFT
    read_limit: int | None = None


def as_plan(choice: int | DraftPlan) -> DraftPlan:
    return choice if isinstance(choice, DraftPlan) else DraftPlan(choice)


def playable(plan: DraftPlan, remaining: int, lookup_len: int, can_draft: bool) -> tuple[int, Provenance]:
    """The k a plan can play this round and who proposes (MAIN when k = 0): never past the
    answer's end, lookup no further than its match, the draft model only where it may speculate.
    The decode loop and the replay both play plans by this rule."""
    k = max(0, min(plan.k, MAX_DRAFT, remaining - 1))
    if plan.source is Provenance.LOOKUP:
        k = min(k, lookup_len)
    elif not can_draft:
        k = 0
    return k, plan.source if k else Provenance.MAIN


class DraftPolicy(Protocol):
    """What the decode loop asks of a policy, round by round. `PolicyDefaults` supplies every
    method but `choose` and `decision` for policies that have no use for it."""

    def begin_answer(self) -> None:
        """A new answer starts: a policy kept across answers forgets the time in between."""
        ...

    def wants_draft_prefill(self) -> bool:
        """Whether the draft reads the prompt even when the answer starts plain."""
        ...

    def choose(self, context: RoundContext) -> int | DraftPlan:
        """This round's plan: a bare k drafts with the draft model."""
        ...

    def choose_ahead(self, context: RoundContext) -> bool:
        """Asked during a plain round before its token is read: True commits the next round to
        plain (its `choose` is then not called), so the loop queues its pass under this one."""
        ...

    def observe(self, event: RoundEvent) -> None:
        """A round finished: what it proposed, kept and cost."""
        ...

    def decision(self) -> Decision:
        """What the policy decided for the round just chosen, carried by the round's event."""
        ...


class PolicyDefaults:
    """The answers of a policy that learns nothing and never looks ahead: subclass it and
    write `choose` and `decision`."""

    def begin_answer(self) -> None:
        pass

    def wants_draft_prefill(self) -> bool:
        return False

    def choose_ahead(self, context: RoundContext) -> bool:
        return False

    def observe(self, event: RoundEvent) -> None:
        pass


class FixedDraftLength(PolicyDefaults):
    """Always drafts k tokens when the source can propose them (lookup: up to k)."""

    def __init__(self, k: int, source: Provenance = Provenance.DRAFT) -> None:
        if not 1 <= k <= MAX_DRAFT:
            raise ValueError(f"draft length must be between 1 and {MAX_DRAFT}, got {k}")
        self.k = k
        self.source = source

    def choose(self, context: RoundContext) -> DraftPlan:
        if self.source is Provenance.LOOKUP:
            return DraftPlan(min(self.k, context.lookup_len), Provenance.LOOKUP)
        return DraftPlan(self.k if context.has_draft else 0)

    def decision(self) -> Decision:
        return Decision(Reason.FIXED, self.k, self.source)


class PlainDecoding(PolicyDefaults):
    """Never drafts: the baseline, run through the same loop as speculation."""

    def choose(self, context: RoundContext) -> int:
        return 0

    def choose_ahead(self, context: RoundContext) -> bool:
        """Every round is plain: the loop may always queue the next one (see decode)."""
        return True

    def decision(self) -> Decision:
        return Decision(Reason.PLAIN, 0, Provenance.MAIN)
