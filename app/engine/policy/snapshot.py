"""What the adaptive controller reports with each round: its choice, why, and the estimates and
prices behind it (the dashboard and the telemetry read them)."""

from __future__ import annotations

from typing import Protocol

from app.engine.decoding.events import Provenance
from app.engine.decoding.policy import DraftPlan
from app.engine.policy.confidence import ConfidenceLink
from app.engine.policy.config import AdaptiveConfig
from app.engine.policy.costs import CostTable, RecentMedian, VerifyCosts
from app.engine.policy.estimates import AcceptanceCounts
from app.engine.policy.one_time import OneTimeCosts
from app.engine.policy.probing import Prober
from app.engine.policy.recheck import PriceRecheck

DRAFT, MAIN = Provenance.DRAFT, Provenance.MAIN


class Described(Protocol):
    """The adaptive controller's state a snapshot reads (a Protocol: it imports this module)."""

    config: AdaptiveConfig
    sources: list[Provenance]
    acceptance: dict[Provenance, AcceptanceCounts]
    drafting: dict[Provenance, CostTable]
    verify: VerifyCosts
    overhead: RecentMedian
    link: ConfidenceLink
    prober: Prober
    one_time: OneTimeCosts
    recheck: PriceRecheck


def describe(
    policy: Described,
    plan: DraftPlan,
    why: str,
    rates: dict[str, tuple[float, ...]] | None,
    speedup: float,
) -> dict[str, object]:
    """The round's snapshot: raw numbers only, since it is built every full choice."""
    return {
        "policy": "adaptive",
        "k": plan.k,
        "source": (plan.source if plan.k else MAIN).value,
        "why": why,
        "bypassed": plan.k == 0,
        # the estimates' own tuples, replaced (never changed) when the counts move
        "acceptance": {s.value: policy.acceptance[s].estimates(policy.config.max_k) for s in policy.sources},
        "draft_s": policy.drafting[DRAFT].measured(),
        "verify_s": policy.verify.measured(),
        "overhead_s": policy.overhead.value,
        "expected_speedup": speedup,
        "speedup_by_k": rates or {},
        # the draft's hit rate by the main's confidence band, once it is worth reading
        "hit_by_confidence": policy.link.rates() if policy.link.informative() else (),
        # (right, judged) of the draft's proposals; whether so few were right that probes thin
        "draft_right": (policy.prober.verdict_hits, policy.prober.verdicts),
        "draft_rarely_right": DRAFT in policy.acceptance and policy.prober.share(DRAFT, policy.link) < 1.0,
        "slow_rounds_left_out": policy.one_time.left_out,  # one-time costs, over the controller's life
        "prices_rechecked": policy.recheck.played,  # rounds replayed after a stall (recheck.py)
    }
