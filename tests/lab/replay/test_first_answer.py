"""The best possible first answer, prices known: the bound the gate's first-answer target is
weighed against (`python -m lab.replay.first_answer`)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from lab.replay.first_answer import best_learner, fixed_time, round_costs
from lab.replay.gate import play, synthetic_trace
from lab.replay.simulate import CostModel


@pytest.mark.parametrize(("shape", "k"), [("compute", 3), ("bandwidth", 6), ("flat-14b", 4), ("flat-14b", 0)])
def test_its_expected_times_are_the_gates_answers_on_average(shape, k):
    """The dynamic programme prices rounds as the gate plays them: its expected time of a fixed-k
    answer is the mean of the gate's own answers (noise off; the gate adds catch-up reads and a
    first plain step timed alone, which the bound leaves out)."""
    costs = replace(CostModel.shaped(shape), draft_step=0.15 * CostModel.shaped(shape).verify[0])
    rng = random.Random(5)
    played = [
        play(synthetic_trace(0.7, False, 32, rng).draft_hits, costs, 0, lambda kk, a: kk, k)
        for _ in range(400)
    ]
    expected = fixed_time(round_costs(shape, 0.15), 0.7, k, 32)
    assert sum(played) / len(played) == pytest.approx(expected, rel=0.03)


def test_where_drafting_is_cheap_the_best_learner_opens_long_and_keeps_most_of_the_best_fixed_k():
    first_k, answers = best_learner("bandwidth", 0.05, 32)
    assert first_k >= 4, "a cheap draft on a flat verify opens with a long round"
    assert all(a.pays for a in answers), "every acceptance of the grid pays there"
    assert min(a.of_best_fixed for a in answers) >= 0.95, answers


def test_where_no_acceptance_would_pay_it_never_drafts():
    first_k, answers = best_learner("compute", 0.9, 32)
    assert first_k == 0
    assert all(a.of_plain == pytest.approx(1.0) and not a.pays for a in answers), answers
