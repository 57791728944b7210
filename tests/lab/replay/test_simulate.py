"""The replay: a policy run over a recorded answer on simulated time, and the controller judged by it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import ClassVar

import pytest

from app.engine.decoding.decode import generate
from app.engine.decoding.events import RoundEvent
from app.engine.decoding.policy import DraftPlan, FixedDraftLength, PlainDecoding, as_plan
from app.engine.decoding.session import ChatSession
from app.engine.decoding.templates.chat import format_chat
from app.engine.features.prompts import BUILTIN_PROMPTS
from app.engine.policy.adaptive import AdaptiveDraftLength
from lab.replay.recording import record_trace
from lab.replay.simulate import (
    CostModel,
    SimulatedClock,
    Trace,
    load_traces,
    replay,
    run_policies,
    save_traces,
)

COMPUTE, BANDWIDTH = CostModel.shaped("compute"), CostModel.shaped("bandwidth")


def _trace(hits: str, seed: int = 0, label: str = "") -> Trace:
    """A synthetic answer: distinct tokens (so prompt lookup finds nothing) with the given verdicts."""
    rng = random.Random(seed)
    answer = tuple(rng.sample(range(1000, 100_000), len(hits)))
    return Trace((1, 2, 3), answer, tuple(c == "1" for c in hits), label)


def _speed(results) -> float:
    return sum(r.tokens for r in results) / sum(r.seconds for r in results)


def test_fixed_k_replays_the_runs_of_hits_and_prices_each_pass():
    trace = _trace("1110" + "11111" + "0")
    costs = CostModel(verify=(1.0, 1.5, 2.0, 2.5), draft_step=0.25, draft_fixed=0.1, draft_read=0.05)
    result = replay(trace, FixedDraftLength(3), costs)
    # rounds: 3 accepted + the main's token, 3 + 1, then k = 1 (2 tokens left): 1 + 1
    assert (result.tokens, result.rounds, result.accepted) == (10, 3, 7)
    # after a round whose every proposal passed, the draft reads its last proposal next time
    draft = (0.1 + 0.75) + (0.1 + 0.75 + 0.05) + (0.1 + 0.25 + 0.05)
    assert result.seconds == pytest.approx(draft + 2.5 + 2.5 + 1.5)
    assert replay(trace, PlainDecoding(), costs).seconds == pytest.approx(10 * 1.0)


def test_replay_matches_the_real_loop_on_the_toy_pair(toy_pair):
    """The trace's verdicts are what the draft would have proposed: the real loop and the replay
    accept the same run in every round."""
    prompt = format_chat(toy_pair.tokenizer, [{"role": "user", "content": BUILTIN_PROMPTS[0].text}])
    trace = record_trace(toy_pair, prompt, 60)
    real = [
        e.accepted
        for e in generate(ChatSession(toy_pair), prompt, policy=FixedDraftLength(3), max_tokens=60)
        if isinstance(e, RoundEvent)
    ]
    replayed: list[int] = []

    class Recording(FixedDraftLength):
        def observe(self, event):
            replayed.append(event.accepted)

    replay(trace, Recording(3), COMPUTE)
    assert replayed == real, "a replay accepts what the real answer accepted, round by round"
    assert 0 < sum(real) < 3 * len(real), "the real answer accepted some drafts but not all"


@pytest.mark.parametrize("costs", [COMPUTE, BANDWIDTH], ids=["compute", "bandwidth"])
def test_adaptive_keeps_up_with_the_best_fixed_k_and_never_loses_to_plain(costs):
    """Answers that are mostly predictable, with misses and one hard stretch each, under both
    machine shapes and noisy timings: adaptive without prompt lookup (the fair match for fixed
    k) is within 5% of the best fixed k over the answers, and no answer is 3% slower than plain."""
    rng = random.Random(7)
    traces = []
    for i in range(6):
        easy = "".join("1" if rng.random() < 0.97 else "0" for _ in range(90))
        hard = "".join("1" if rng.random() < 0.2 else "0" for _ in range(12))
        traces.append(_trace(easy[:50] + hard + easy[50:], seed=i))
    results = run_policies(traces, costs.with_noise(0.1), (1, 2, 3, 4, 6, 8), adaptive={"adaptive": {}})
    best = max(_speed(v) for m, v in results.items() if m.startswith("fixed"))
    assert best >= 1.1 * _speed(results["plain"])  # speculation pays here
    assert _speed(results["adaptive"]) >= 0.95 * best
    for mine, plain in zip(results["adaptive"], results["plain"]):
        assert mine.tokens_per_second >= 0.97 * plain.tokens_per_second


@pytest.mark.parametrize("costs", [COMPUTE, BANDWIDTH], ids=["compute", "bandwidth"])
def test_a_useless_draft_costs_little_and_only_in_the_first_answer(costs):
    traces = [_trace("0" * 128, seed=i) for i in range(6)]
    results = run_policies(traces, costs, (2,), adaptive={"adaptive": {}})
    ratios = [
        a.tokens_per_second / p.tokens_per_second for a, p in zip(results["adaptive"], results["plain"])
    ]
    assert ratios[0] >= 0.93, ratios  # learning: a few draft rounds
    assert min(ratios[1:]) >= 0.975, ratios  # probes within their 1.5% budget
    assert results["fixed2"][0].tokens_per_second < 0.8 * results["plain"][0].tokens_per_second


def test_where_reading_the_skipped_text_exceeds_the_budget_probes_read_only_what_they_afford():
    """On a compute-bound machine the draft's catch-up costs a share of a step per skipped token,
    so reading a long bypass back would cost more than the probe budget whatever the spacing:
    probes read only the last tokens and skip the rest, and a useless draft is still probed
    now and then, within the budget."""

    class Recording(AdaptiveDraftLength):
        plans: ClassVar[list[DraftPlan]] = []

        def choose(self, context):
            plan = as_plan(super().choose(context))
            self.plans.append(plan)
            return plan

    traces = [_trace("0" * 200, seed=i) for i in range(4)]
    for costs in (COMPUTE, BANDWIDTH):
        clock = SimulatedClock()
        policy = Recording(clock=clock)
        policy.plans = []
        results = [replay(t, policy, costs, clock=clock) for t in traces]
        first = results[0].rounds
        probes = [p for p in policy.plans[first:] if p.k]
        assert probes, [r.plans for r in results]
        assert all(p.read_limit == policy.settings.probe_read for p in probes), probes
        plain = [replay(t, PlainDecoding(), costs) for t in traces]
        # the budget holds over the answers after the first; one answer may hold two probes
        assert sum(r.seconds for r in results[1:]) <= 1.025 * sum(r.seconds for r in plain[1:])
        for mine, base in zip(results[1:], plain[1:]):
            assert mine.tokens_per_second >= 0.965 * base.tokens_per_second


def test_a_useless_draft_is_not_handed_back_to_the_prior_answer_after_answer():
    clock = SimulatedClock()
    policy = AdaptiveDraftLength(clock=clock)
    for i in range(12):
        replay(_trace("0" * 64, seed=i), policy, BANDWIDTH, clock=clock)
    assert policy.acceptance()[0] < 0.2
    assert not policy.wants_draft_prefill()


def test_trace_needs_one_verdict_per_token():
    with pytest.raises(ValueError):
        Trace((1,), (5, 6), (True,))


def test_saved_answers_load_back_as_they_were(tmp_path):
    traces = [Trace((1, 2), (5, 6), (True, False), "code-1"), _trace("101", seed=1)]
    save_traces(tmp_path / "t.json", traces, COMPUTE)
    loaded, costs = load_traces(tmp_path / "t.json")
    assert loaded == traces, "the answers load back unchanged"
    assert costs == COMPUTE, "the costs load back unchanged"


def _recorded(name: str) -> list[Trace]:
    from pathlib import Path

    return load_traces(Path(__file__).parents[2] / "engine" / "data" / name)[0]


@pytest.mark.parametrize("seed", range(12))
def test_on_real_answers_of_the_qwen_coder_pair_adaptive_keeps_up_and_never_loses(seed):
    """Real text: Qwen2.5-Coder 1.5B's answers to the built-in prompts, with its 0.5B draft right
    on 76% of their tokens (94% on one code answer, 50% on a creative one). Under the GPU-like
    shape, where speculation pays 1.3x with the best fixed k, adaptive keeps up over all answers
    and loses no answer to plain by more than 3%, whatever the timing noise (each seed is
    another draw of it: before prices kept their seconds through the plain step's first noisy
    measurements, three seeds in twelve lost 2-5% on an answer and one trailed fixed k by 8%)."""
    traces = _recorded("qwen_coder_traces.json")
    assert 0.7 < sum(sum(t.draft_hits) for t in traces) / sum(len(t.answer) for t in traces) < 0.8
    results = run_policies(
        traces, BANDWIDTH.with_noise(0.1), (1, 2, 3, 4, 6, 8), adaptive={"adaptive": {}}, seed=seed
    )
    best = max(_speed(v) for m, v in results.items() if m.startswith("fixed"))
    assert best >= 1.25 * _speed(results["plain"])
    assert _speed(results["adaptive"]) >= 0.95 * best
    for mine, plain in zip(results["adaptive"], results["plain"]):
        assert mine.tokens_per_second >= 0.97 * plain.tokens_per_second


def test_on_the_14b_shape_adaptive_takes_most_of_what_a_paying_draft_offers():
    """The 14B bf16 pair on an H100 (flat-14b: a draft step of 0.35 plain steps, a verify pass of
    1.55-1.83): a draft right on 90% of tokens pays 18-21% at k = 4-6. Adaptive keeps within 5%
    of the best fixed k (the issue's target where drafting pays), and most answers beat plain."""
    traces = load_traces(Path(__file__).parents[2] / "engine" / "data" / "draft_right_90.json")[0]
    costs = CostModel.shaped("flat-14b", step=1.0, noise=0.1)
    results = run_policies(traces, costs, (4, 6), adaptive={"adaptive": {}})
    best = max(_speed(results["fixed4"]), _speed(results["fixed6"]))
    assert best >= 1.15 * _speed(results["plain"])
    assert _speed(results["adaptive"]) >= 0.95 * best
    faster = [
        r.tokens_per_second >= p.tokens_per_second for r, p in zip(results["adaptive"], results["plain"])
    ]
    assert sum(faster) >= 15, faster
