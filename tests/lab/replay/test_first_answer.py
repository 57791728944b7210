"""The best possible first answer, prices known: the bound the gate's first-answer target is
weighed against (`python -m lab.replay.first_answer`)."""

from __future__ import annotations

import random

import pytest

from lab.replay.first_answer import best_learner, first_answers, fixed_time, hopeful_learner, round_costs
from lab.replay.gate import Cell, play, synthetic_trace


@pytest.mark.parametrize(("shape", "k"), [("compute", 3), ("bandwidth", 6), ("flat-14b", 4), ("flat-14b", 0)])
def test_its_expected_times_are_the_gates_answers_on_average(shape, k):
    """The dynamic programme prices rounds as the gate plays them: its expected time of a fixed-k
    answer is the mean of the gate's own answers (noise off; the gate adds catch-up reads and a
    first plain step timed alone, which the bound leaves out)."""
    costs = Cell(shape, 0.15, alpha=0.0, bursty=False, length=0).costs().with_noise(0.0)
    rng = random.Random(5)
    played = [
        play(synthetic_trace(0.7, False, 32, rng).draft_hits, costs, 0, lambda kk, a: kk, k)
        for _ in range(400)
    ]
    expected = fixed_time(round_costs(shape, 0.15), 0.7, k, 32)
    assert sum(played) / len(played) == pytest.approx(expected, rel=0.03)


def test_where_drafting_is_cheap_the_best_learner_opens_long_and_keeps_most_of_the_best_fixed_k():
    costs = round_costs("bandwidth", 0.05)
    learner = best_learner(costs, 32)
    assert learner(32, 0, 0) >= 4, "a cheap draft on a flat verify opens with a long round"
    answers = first_answers(costs, learner, 32)
    assert all(a.pays for a in answers), "every acceptance of the grid pays there"
    assert min(a.of_best_fixed for a in answers) >= 0.95, answers


def test_where_no_acceptance_would_pay_neither_learner_drafts():
    costs = round_costs("compute", 0.9)
    for learner in (best_learner(costs, 32), hopeful_learner(costs, 0.8)):
        answers = first_answers(costs, learner, 32)
        assert learner(32, 0, 0) == 0
        assert all(a.of_plain == pytest.approx(1.0) and not a.pays for a in answers), answers


def test_a_rule_without_hope_never_learns_that_a_dear_verify_pays():
    """Where a verify pass costs 1.7 plain steps, drafting pays only if the draft is nearly
    always right: the rule on the belief's middle never drafts, so never learns; read at its
    80th percentile it drafts first, and keeps most of the best fixed k."""
    costs = round_costs("flat-14b", 0.3)
    middle, hopeful = (first_answers(costs, hopeful_learner(costs, q), 32) for q in (0.5, 0.8))
    assert middle[-1].pays and middle[-1].of_best_fixed < 0.7, middle
    assert hopeful[-1].of_best_fixed > 0.95, hopeful
