"""Acceptance chances computed from the two models' distributions: right by hand, equal to what
the acceptance rules actually accept, and 1 under residual sampling for a draft equal to the main."""

from __future__ import annotations

import math

import mlx.core as mx
import pytest

from app.engine.decoding import acceptance
from app.engine.decoding.loading import load_pair
from app.engine.decoding.sampling import Sampler, SamplingParams
from app.engine.measure.agreement import Agreement, accepted_per_round, agreement, per_token

WARM = SamplingParams(temperature=0.7, seed=3)


def test_expected_accepted_tokens_per_round_follow_runs_of_acceptance() -> None:
    found = Agreement(exact=(0.5, 1.0, 0.5), residual=(1.0, 1.0, 1.0))
    # k = 2 starts at 0 (0.5 + 0.5·1.0) and at 1 (1.0 + 1.0·0.5): 1.0 and 1.5
    assert accepted_per_round([found], "exact", 2) == pytest.approx(1.25)
    assert accepted_per_round([found], "residual", 3) == pytest.approx(3.0)
    assert per_token([found], "exact") == pytest.approx(2 / 3)
    # two answers: runs never cross the seam, so each keeps its own starts
    assert accepted_per_round([found, Agreement((0.0, 0.0), (0.0, 0.0))], "exact", 2) == pytest.approx(
        2.5 / 3
    )
    assert accepted_per_round([found], "exact", 4) == 0.0  # no start has 4 positions after it
    with pytest.raises(ValueError, match="exact or residual"):
        per_token([found], "greedy")


def test_a_draft_equal_to_the_main_always_stands_under_residual_sampling_but_not_exact_matching(
    toy_models, toy_prompt
) -> None:
    twin = load_pair(toy_models.main, toy_models.main)
    found = agreement(twin.main, twin.draft, Sampler(WARM), toy_prompt, toy_prompt[:12])
    assert len(found.residual) == 12
    assert min(found.residual) == pytest.approx(1.0, abs=1e-4)
    # exact matching needs two independent draws to agree: Σ p², below 1 wherever p is not certain
    assert per_token([found], "exact") < 0.9


@pytest.mark.parametrize("pair_name", ["toy_pair", "toy_useless_pair"])
def test_the_computed_chances_are_what_the_acceptance_rules_accept(pair_name, toy_prompt, request) -> None:
    toy_pair = request.getfixturevalue(pair_name)  # a close draft, and one with random weights
    sampler = Sampler(WARM)
    found = agreement(toy_pair.main, toy_pair.draft, sampler, toy_prompt, toy_prompt[:1])
    ids = mx.array(toy_prompt, dtype=mx.uint32)[None]
    p = sampler.process(toy_pair.main.model(ids)[0, -1:], None)
    q = sampler.process(toy_pair.draft.model(ids)[0, -1:], None)
    draws = 4000  # rows are judged independently: one call judges them all
    proposed = mx.random.categorical(mx.repeat(q, draws, axis=0), key=mx.random.key(5)).astype(mx.uint32)
    for rule, expected in (("exact", found.exact[0]), ("residual", found.residual[0])):
        accept, _ = acceptance.RULES[rule](
            mx.repeat(p, draws + 1, axis=0), mx.repeat(q, draws, axis=0), proposed, sampler
        )
        rate = accept.astype(mx.float32).mean().item()
        spread = math.sqrt(expected * (1 - expected) / draws)
        assert abs(rate - expected) < 4 * spread + 1e-3, (rule, rate, expected)
    assert found.residual[0] > found.exact[0]


def test_greedy_has_no_distributions_to_compare(toy_pair, toy_prompt) -> None:
    with pytest.raises(ValueError, match="temperature above 0"):
        agreement(toy_pair.main, toy_pair.draft, Sampler(SamplingParams()), toy_prompt, toy_prompt[:2])
