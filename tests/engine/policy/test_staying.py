"""A draft the controller chose, predicted just under the margin, plays on while the evidence is thin."""

from __future__ import annotations

import random

from app.engine.decoding.events import Provenance
from app.engine.decoding.policy import DraftPlan
from app.engine.measure.replay import CostModel, SimulatedClock, Trace, replay
from app.engine.policy.adaptive import AdaptiveDraftLength
from app.engine.policy.config import AdaptiveConfig
from app.engine.policy.costs import speedups
from app.engine.policy.estimates import AcceptanceCounts
from app.engine.policy.staying import StayRule

DRAFT, MAIN = Provenance.DRAFT, Provenance.MAIN
# plain costs 1 s a token; a verify pass 1.55 s, drafting 0.1 s and 0.35 s a token
PRICES = (1.0, 0.0, [0.0] + [0.1 + 0.35 * k for k in range(1, 9)], [0.0, 1.0] + [1.55] * 8)


def _counts(rounds: float) -> AcceptanceCounts:
    """Every position right 74% of the time, from `rounds` rounds of evidence: a draft
    predicted just short of plain at its best k."""
    counts = AcceptanceCounts(0.5, 1.0, 0.92)
    counts.restore([0.74 * rounds] * 8, [float(rounds)] * 8)
    return counts


def _point(counts: AcceptanceCounts) -> list[float]:
    return speedups(counts.tokens(8), *PRICES, 8)


def test_a_chosen_draft_plays_on_short_while_the_evidence_is_thin_and_not_for_long():
    rule = StayRule(AdaptiveConfig())
    chosen, counts = (DraftPlan(6, DRAFT), "model"), _counts(6)
    point = _point(counts)
    assert 0.95 < max(point) < 1.0
    plays = [rule.plan(DraftPlan(0, MAIN), chosen, 8, counts, PRICES, point) for _ in range(4)]
    assert plays[:3] == [DraftPlan(3, DRAFT)] * 3  # at most three tokens: a dead draft costs little
    assert plays[3] is None  # three rounds in a row at most
    # the same estimates from many rounds: no reason to doubt them
    many = _counts(200)
    assert max(_point(many)) < 1.0
    assert rule.plan(DraftPlan(0, MAIN), chosen, 8, many, PRICES, _point(many)) is None
    # only a draft the model chose: not after a probe, nor where the choice itself drafts
    assert rule.plan(DraftPlan(0, MAIN), (DraftPlan(2, DRAFT), "probe"), 8, counts, PRICES, point) is None
    assert rule.plan(DraftPlan(5, DRAFT), chosen, 8, counts, PRICES, point) is None


def _answer(hits: str, seed: int) -> Trace:
    rng = random.Random(seed)
    return Trace((1, 2, 3), tuple(rng.sample(range(1000, 100_000), len(hits))), tuple(c == "1" for c in hits))


def test_a_draft_that_stops_paying_is_left_within_three_short_rounds():
    """The 14B shape, no noise: after an answer where the draft is right on 90% of tokens, one
    where it is right on the first 60 and then on nothing. With the rule the draft plays three
    rounds of at most three tokens more than without it, and the answer loses under 5%."""
    rng = random.Random(1)
    first = _answer("".join("1" if rng.random() < 0.9 else "0" for _ in range(128)), 1)
    dead = _answer("1" * 60 + "0" * 68, 2)
    costs = CostModel.shaped("flat-14b", step=1.0)
    runs = {}
    for rounds in (0, 3):
        clock = SimulatedClock()
        policy = AdaptiveDraftLength(AdaptiveConfig(stay_rounds=rounds), clock=clock, use_lookup=False)
        replay(first, policy, costs, clock=clock)
        runs[rounds] = replay(dead, policy, costs, clock=clock)
    off, on = runs[0], runs[3]
    stays = on.plans[("draft", 3)] - off.plans[("draft", 3)]
    assert stays == 3 and on.plans[("main", 0)] >= off.plans[("main", 0)] - 3
    assert on.tokens_per_second >= 0.95 * off.tokens_per_second
