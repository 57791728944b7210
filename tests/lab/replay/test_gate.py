"""The speed gate: the default controller against plain, every fixed k and a reference policy,
on simulated time with seeded noise, so the verdict is the same on every machine and run."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from lab.replay.gate import SHAPES, grid, play, run_grid, summary, synthetic_trace
from lab.replay.simulate import CostModel, replay

# every nineteenth cell of the grid: each shape, acceptance, burstiness and length appears, in
# mixed combinations, at a cost that fits the CI run (about 20 s of CPU time;
# `python -m lab.replay.gate` runs all 620 cells)
STRIDE = 19
# what the default controller holds on those cells today, so that no change makes it worse
# (0.966 of the best fixed k, 0.979 of plain, 2 cells a little short of their targets). The
# controller before the gate missed them in 7 of these cells and kept 0.968 of plain where no k
# pays; the one before learning drafted on a hopeful reading missed none of these, but 44 first
# answers over the whole grid (23 now). On the whole grid (`python -m lab.replay.gate`, 620 cells)
# the targets (`CellResult.verdict`) are still missed in some cells; misses are printed.
FLOOR_PAYS, FLOOR_NO_PAY, MISSED_AT_MOST = 0.96, 0.975, 2


@pytest.mark.parametrize("shape", SHAPES)
def test_the_gate_plays_fixed_k_and_plain_exactly_as_the_replay_does(shape):
    """The gate's fast path for fixed-k and plain answers gives `replay`'s seconds, noise included."""
    rng = random.Random(3)
    costs = replace(CostModel.shaped(shape, noise=0.1), draft_step=0.003)
    for bursty in (False, True):
        trace = synthetic_trace(0.7, bursty, 60, rng)
        for k in (0, 1, 3, 8):
            policy = FixedDraftLength(k) if k else PlainDecoding()
            expected = replay(trace, policy, costs, seed=5, lookup=False).seconds
            assert play(trace.draft_hits, costs, 5, lambda played, accepted: played, k) == pytest.approx(
                expected, rel=1e-12
            )


def test_bursty_answers_have_the_mean_they_were_asked_for():
    rng = random.Random(0)
    for alpha in (0.3, 0.85):
        hits = [h for _ in range(20) for h in synthetic_trace(alpha, True, 512, rng).draft_hits]
        assert sum(hits) / len(hits) == pytest.approx(alpha, abs=0.03)
        runs = sum(1 for a, b in zip(hits, hits[1:]) if a != b)
        assert runs < 0.75 * 2 * alpha * (1 - alpha) * len(hits)  # fewer changes than independent draws


def test_the_default_controller_holds_the_speed_gate():
    results = run_grid(grid()[::STRIDE], workers=2)
    print("\n".join(summary(results)))
    pays = [r for r in results if r.pays]
    assert pays and len(pays) < len(results)  # the grid has cells of both kinds
    worst_pays = min(r.adaptive / r.best_fixed for r in pays)
    worst_no_pay = min(r.adaptive / r.plain for r in results if not r.pays)
    assert worst_pays >= FLOOR_PAYS, "adaptive fell further behind the best fixed k"
    assert worst_no_pay >= FLOOR_NO_PAY, "adaptive lost more against plain where no k pays"
    assert sum(1 for r in results if r.verdict()) <= MISSED_AT_MOST
    adaptive = sum(r.adaptive / r.best_fixed for r in results)
    reference = sum(r.reference / r.best_fixed for r in results)
    assert adaptive > reference, "adaptive is beaten by the simple reference policy"
