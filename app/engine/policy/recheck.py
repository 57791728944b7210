"""Prices measured in a stall are checked again, or a paying draft can stay bypassed for good.

A round's prices (the draft's k steps, the main's pass over k + 1 tokens) are medians of the
rounds played at that size, and sizes are played only while they look best. Two rounds caught in
a slow moment of a shared machine, early in a pair's life, priced every draft length above plain
on an H100 (a 14B main whose draft pays 1.2x), and the draft sat out for hundreds of rounds:
probes read what the draft skipped, so they price neither its steps nor most verify sizes
(docs/measurements/2026-11-26-gpu-bench-repeated.md). So after a probe right on every token it
proposed, a draft length whose prices rest on fewer than `THIN` rounds, and which would pay by
the draft's long-run record at the cheapest of those rounds though not at their median, is
played once. Each such round is one more sample, so this stops by itself; a draft that is dear
at its cheapest (a 4-bit draft on a GPU) is never rechecked.

Many samples go stale too. A shared host changes speed, and not evenly: on an H100 a 0.5B
draft's passes took 1.8 times as long in its slow spells, a 14B main's 1.3 times. A draft
length priced in a slow spell and not played since kept a draft that paid 1.1-1.2x bypassed
through twenty answers of faster spells, probes and all, since a probe prices neither
(docs/measurements/2026-11-27-stale-prices.md). So once the draft has played no priced round
for `stale_after` rounds, the longest length in dispute by the current acceptance estimates is
played `fresh_rounds` in a row, and their prices replace that length's old ones (draft and verify).
"""

from __future__ import annotations

from typing import Protocol

from app.engine.decoding.events import Provenance, RoundEvent
from app.engine.decoding.policy import DraftPlan
from app.engine.policy.config import AdaptiveConfig
from app.engine.policy.costs import CostTable, RecentMedian, VerifyCosts
from app.engine.policy.estimates import AcceptanceCounts

THIN = 3  # rounds at a size below which its price may still be one slow moment's


class Priced(Protocol):
    """What the adaptive controller keeps that a recheck is judged by."""

    config: AdaptiveConfig
    record: AcceptanceCounts
    acceptance: dict[Provenance, AcceptanceCounts]
    drafting: dict[Provenance, CostTable]
    verify: VerifyCosts
    overhead: RecentMedian

    def plain_seconds(self, step: float) -> float: ...


class PriceRecheck:
    """Remembers the longest draft the model chose and asks for rounds at the longest length up
    to it whose price is in dispute: one after a good probe where its prices are thin, several
    where they are stale, whose prices then replace the old ones."""

    def __init__(self) -> None:
        self.model_k = 0  # the longest draft length the model has chosen
        self.due = 0  # the length to recheck; 0: none
        self.left = 0  # rounds of it still to play
        self.replace = False  # whether the next recheck round's prices replace the size's
        self.played = 0  # rechecks over the controller's life
        self.rounds = 0  # rounds observed over the controller's life
        self.priced_at = 0  # the round a draft round was last priced

    def observed(self, event: RoundEvent, at: Priced) -> None:
        """Every round, before its prices are taken: a stale size's first recheck round clears
        its old prices; once the draft has played no priced round for `stale_after` rounds (it sat
        out, or only probed), the longest length in dispute is rechecked. A controller without a
        draft (prompt lookup alone) has no draft prices to go stale."""
        self.rounds += 1
        if event.source is Provenance.DRAFT and event.k and event.catch_up <= 1:
            if self.replace and event.policy.get("why") == "recheck":
                at.drafting[Provenance.DRAFT].forget(event.k)
                at.verify.forget(event.k + 1)
                self.replace = False
            self.priced_at = self.rounds
        elif (
            (stale := at.config.stale_after) is not None
            and self.rounds - self.priced_at >= stale
            and not self.due
            and Provenance.DRAFT in at.acceptance
        ):
            self.priced_at = self.rounds  # checked: the next check is as far away
            k = self._disputed(at, at.acceptance[Provenance.DRAFT], thin_only=False)
            if k:
                self.due, self.left, self.replace = k, at.config.fresh_rounds, True

    def noted(self, plan: DraftPlan, why: str) -> None:
        if why == "model" and plan.source is Provenance.DRAFT:
            self.model_k = max(self.model_k, plan.k)

    def after_probe(self, event: RoundEvent, at: Priced) -> None:
        """A probe of the draft was just observed (a stale length's recheck, if due, stays due)."""
        if self.replace:
            return
        self.due = 0
        if event.source is not Provenance.DRAFT or event.accepted < event.k:
            return
        self.due = self._disputed(at, at.record, thin_only=True)
        self.left, self.replace = 1, False

    def _disputed(self, at: Priced, rates: AcceptanceCounts, *, thin_only: bool) -> int:
        """The longest draft length up to the model's (with `thin_only`, priced on fewer than
        `THIN` rounds) which would pay at `rates` at the cheapest of its rounds but not at their
        median; 0 if none."""
        step = at.verify.plain_step()
        if not step:
            return 0
        tokens, plain = rates.tokens(self.model_k), at.plain_seconds(step)
        drafting, verify = at.drafting[Provenance.DRAFT].by_n, at.verify.by_n
        due = 0
        for k in range(1, self.model_k + 1):
            d, v = drafting.get(k), verify.get(k + 1)
            if d is None or v is None or not d.samples or not v.samples:
                continue
            if thin_only and min(d.count, v.count) >= THIN:
                continue
            cheapest = at.overhead.value + (min(d.samples) + min(v.samples)) * step
            usual = at.overhead.value + (d.value + v.value) * step
            margin = at.config.margin
            if tokens[k] * plain > margin * cheapest and tokens[k] * plain <= margin * usual:
                due = k  # the longest in dispute: it gains most where the draft pays
        return due

    def take(self, available: int) -> DraftPlan | None:
        """The recheck round, if one is due and the draft can play it."""
        if not self.due:
            return None
        k = min(self.due, available)
        self.left -= 1
        if self.left <= 0 or not k:
            self.due = 0
        if not k:
            self.replace = False
            return None
        self.played += 1
        return DraftPlan(k, Provenance.DRAFT)
