"""Prices caught in a stall are played again after a good probe, and stale ones once the draft
has gone unpriced for long, so a paying draft comes back; a draft that is dear even at its
cheapest is never rechecked."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.decoding.policy import PlainDecoding
from app.engine.measure.replay import CostModel, SimulatedClock, load_traces, replay, run_policies
from app.engine.policy.adaptive import AdaptiveDraftLength
from app.engine.policy.config import AdaptiveConfig
from tests.engine.helpers import agreeing_trace

STEP = 0.011
# a 14B bf16 main with a 0.5B draft on an H100 (runs E-H): verify passes of 2-9 tokens cost
# about the same, a draft step 0.39 of a plain step; fixed k = 4 pays about 1.3x
FLAT = CostModel(
    (1.1 * STEP,) + tuple(STEP * (1.55 + 0.01 * (n - 2)) for n in range(2, 10)),
    0.39 * STEP, 0.0, 0.01 * STEP, 0.02 * STEP, 0.1, "flat", 0.5 * STEP, STEP,
)  # fmt: skip


def _later(costs: CostModel, slow: dict[int, float], seeds: range) -> tuple[list[float], int]:
    """Speed over plain of answers 2-6 per seed (the first holds the slow rounds), and rechecks."""
    ratios, rechecks = [], 0
    for seed in seeds:
        clock = SimulatedClock()
        policy = AdaptiveDraftLength(clock=clock)
        for i in range(6):
            trace = agreeing_trace(0.9, seed * 100 + i)
            plain = replay(trace, PlainDecoding(), costs, seed=seed * 100 + i)
            mine = replay(
                trace, policy, costs, clock=clock, seed=seed * 100 + i, slow=slow if i == 0 else None
            )
            if i:
                ratios.append(plain.seconds / mine.seconds)
        rechecks += policy.recheck.played
    return ratios, rechecks


@pytest.mark.parametrize("first", [8, 10])
def test_draft_rounds_caught_in_a_stall_do_not_keep_a_paying_draft_out(first):
    """Seen on an H100: a few early rounds twice as slow priced every draft length above plain,
    and the draft sat out for three answers where fixed k = 4 paid 1.25x."""
    ratios, rechecks = _later(FLAT, {r: 3.0 for r in range(first, first + 4)}, range(5))
    assert rechecks > 0
    assert sum(ratios) / len(ratios) >= 1.17, ratios


def test_a_draft_dear_at_its_cheapest_is_never_rechecked():
    """A 4-bit pair on an H100, where no draft length pays: probes right on all they proposed
    are common (the draft is right on 90%), and a recheck would only cost."""
    gpu = CostModel.shaped("gpu-4bit", step=0.0055, noise=0.1)
    _, rechecks = _later(gpu, {}, range(3))
    assert rechecks == 0


def test_prices_from_a_slow_spell_are_played_again_once_stale():
    """A shared host whose slow spells, every other two answers, make the draft's passes 1.8x
    as long and the main's 1.3x (seen on an H100): prices taken in a slow spell, never played
    since, kept a draft that pays 1.2x in the fast spells bypassed through them. Once the draft
    has gone unpriced for `stale_after` rounds its longest length in dispute is played again,
    whose prices replace the old: adaptive keeps most of what the best fixed k gets."""
    traces = load_traces(Path(__file__).parents[1] / "data" / "draft_right_90.json")[0]
    spells = CostModel.shaped("flat-14b-spells", noise=0.1)
    never = AdaptiveConfig(stale_after=None)
    variants = {"adaptive": {"use_lookup": False}, "never stale": {"use_lookup": False, "config": never}}
    results = run_policies(traces, spells, (4, 6), adaptive=variants)
    speed = {m: sum(r.tokens for r in rs) / sum(r.seconds for r in rs) for m, rs in results.items()}
    best = max(speed["fixed4"], speed["fixed6"])
    assert best >= 1.07 * speed["plain"]
    assert speed["adaptive"] >= 0.955 * best, speed  # 0.982
    assert speed["never stale"] <= speed["adaptive"] - 0.02 * best, speed  # 0.938


def test_prompt_lookup_alone_answers_long_without_a_draft_to_recheck():
    """The controller the app plays when no draft is chosen: hundreds of rounds with no draft
    round at all never look for a draft's stale prices."""
    traces = load_traces(Path(__file__).parents[1] / "data" / "qwen_coder_traces.json")[0]
    results = run_policies(traces, FLAT, (2,), adaptive={"lookup": {"use_draft": False}})
    assert sum(r.rounds for r in results["lookup"]) > 4 * 64
    assert all(r.tokens == len(t.answer) for r, t in zip(results["lookup"], traces))
