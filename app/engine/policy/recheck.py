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
    drafting: dict[Provenance, CostTable]
    verify: VerifyCosts
    overhead: RecentMedian

    def plain_seconds(self, step: float) -> float: ...


class PriceRecheck:
    """Remembers the longest draft the model chose and, after a good probe, asks for one round at
    the longest length up to it whose price is in dispute."""

    def __init__(self) -> None:
        self.model_k = 0  # the longest draft length the model has chosen
        self.due = 0  # the length to recheck; 0: none
        self.played = 0  # rechecks over the controller's life

    def noted(self, plan: DraftPlan, why: str) -> None:
        if why == "model" and plan.source is Provenance.DRAFT:
            self.model_k = max(self.model_k, plan.k)

    def after_probe(self, event: RoundEvent, at: Priced) -> None:
        """A probe of the draft was just observed."""
        step = at.verify.plain_step()
        self.due = 0
        if event.source is not Provenance.DRAFT or event.accepted < event.k or not step:
            return
        tokens, plain = at.record.tokens(self.model_k), at.plain_seconds(step)
        drafting, verify = at.drafting[Provenance.DRAFT].by_n, at.verify.by_n
        for k in range(1, self.model_k + 1):
            d, v = drafting.get(k), verify.get(k + 1)
            if d is None or v is None or not d.samples or not v.samples or min(d.count, v.count) >= THIN:
                continue
            cheapest = at.overhead.value + (min(d.samples) + min(v.samples)) * step
            usual = at.overhead.value + (d.value + v.value) * step
            margin = at.config.margin
            if tokens[k] * plain > margin * cheapest and tokens[k] * plain <= margin * usual:
                self.due = k  # the longest in dispute: it gains most where the draft pays

    def take(self, available: int) -> DraftPlan | None:
        """The recheck round, if one is due and the draft can play it."""
        if not self.due:
            return None
        k, self.due = min(self.due, available), 0
        if not k:
            return None
        self.played += 1
        return DraftPlan(k, Provenance.DRAFT)
