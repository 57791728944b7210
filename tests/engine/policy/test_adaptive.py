"""The adaptive controller's behaviour on synthetic answers and costs: when it drafts, how far,
when it stops, how it notices a draft that starts to pay, and what it keeps across sessions."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from app.engine.decoding.events import Decision, Provenance, Reason, RoundEvent
from app.engine.decoding.policy import RoundContext
from app.engine.policy.adaptive import MAX_K, AdaptiveDraftLength
from app.engine.policy.settings import ControllerSettings
from lab.replay.simulate import CostModel, SimulatedClock, Trace, replay

# a GPU-like machine (a pass over n tokens costs about one step) and a CPU-like one (it grows with n)
BANDWIDTH = CostModel.shaped("bandwidth")
COMPUTE = CostModel.shaped("compute")
QUEUED = replace(BANDWIDTH, queued=0.009)  # the loop queues plain steps, as on a GPU


class Logged(AdaptiveDraftLength):
    """The controller, keeping every round it observed."""

    def __init__(self, **kw: object) -> None:
        self.clock = SimulatedClock()
        super().__init__(clock=self.clock, **kw)  # type: ignore[arg-type]
        self.log: list[RoundEvent] = []

    def observe(self, event: RoundEvent) -> None:
        self.log.append(event)
        super().observe(event)

    def play(self, hits: str, costs: CostModel = BANDWIDTH, seed: int = 0) -> float:
        """One answer with these draft verdicts ('1': the draft's pick is the token); its tok/s."""
        return replay(_trace(hits, seed), self, costs, clock=self.clock, seed=seed).tokens_per_second


def _trace(hits: str, seed: int = 0) -> Trace:
    rng = random.Random(seed)
    answer = tuple(rng.sample(range(1000, 100_000), len(hits)))  # distinct: lookup finds nothing
    return Trace((1, 2, 3), answer, tuple(c == "1" for c in hits))


def _hits(p: float, n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "".join("1" if rng.random() < p else "0" for _ in range(n))


def _plain(hits: str, costs: CostModel = BANDWIDTH, seed: int = 0) -> float:
    from app.engine.decoding.policy import PlainDecoding

    return replay(_trace(hits, seed), PlainDecoding(), costs, seed=seed).tokens_per_second


def _chosen_k(policy: Logged, since: int = 0) -> float:
    """The mean k of the rounds the controller chose as best."""
    ks = [e.k for e in policy.log[since:] if e.decision.reason is Reason.BEST and e.k]
    return sum(ks) / len(ks)


@pytest.mark.parametrize("costs", [BANDWIDTH, COMPUTE, QUEUED], ids=["bandwidth", "compute", "queued"])
def test_a_draft_that_is_never_right_is_bypassed_and_costs_little(costs):
    policy = Logged()
    first = policy.play("0" * 200, costs)
    later = [policy.play("0" * 200, costs, seed) for seed in range(1, 4)]
    assert first >= 0.9 * _plain("0" * 200, costs)  # learning costs a few rounds
    assert all(mine >= 0.96 * _plain("0" * 200, costs, seed) for seed, mine in enumerate(later, 1))
    tail = policy.log[-100:]
    assert sum(e.decision.reason is Reason.BYPASS for e in tail) >= 90
    assert policy.decision().bypassed or policy.decision().reason is Reason.PROBE


def test_a_draft_too_slow_to_pay_is_bypassed_even_when_it_is_right():
    slow = replace(BANDWIDTH, draft_step=0.02)  # a draft step costs two main passes
    policy = Logged()
    for seed in range(3):
        policy.play(_hits(0.9, 200, seed), slow, seed)
    assert sum(e.k == 0 for e in policy.log[-100:]) >= 85
    assert policy.speedups()[0] < 1.0


def test_the_draft_length_grows_with_acceptance():
    ks = []
    for p in (0.6, 0.97):
        policy = Logged()
        for seed in range(3):
            policy.play(_hits(p, 200, seed), BANDWIDTH, seed)
        ks.append(_chosen_k(policy, since=50))
    assert ks[1] >= ks[0] + 2, ks


def test_the_draft_length_shrinks_when_drafting_gets_dearer():
    policy = Logged()
    hits = _hits(0.9, 300)
    policy.play(hits, replace(BANDWIDTH, draft_step=0.001))
    cheap = _chosen_k(policy, since=50)
    mark = len(policy.log)
    policy.play(hits, replace(BANDWIDTH, draft_step=0.005), seed=1)
    assert _chosen_k(policy, since=mark + 30) < cheap - 1


def test_a_probe_notices_a_draft_that_starts_to_pay():
    """Bypassed through a stretch where the draft is never right, it is drafting again within a
    bounded number of tokens once the draft is right (the probes' spacing and a few follow-ups)."""
    policy = Logged()
    policy.play("0" * 400 + "1" * 400, QUEUED)
    tokens, turned = 0, None
    for e in policy.log:
        if tokens >= 400 and turned is None and e.decision.reason is Reason.BEST and e.k:
            turned = tokens - 400
        tokens += len(e.emitted)
    assert any(e.decision.bypassed for e in policy.log[:150])
    assert turned is not None and turned <= 250, turned


@pytest.mark.parametrize("costs", [BANDWIDTH, COMPUTE], ids=["bandwidth", "compute"])
def test_probes_stay_within_their_budget_and_read_little(costs):
    policy = Logged()
    for seed in range(4):
        policy.play("0" * 300, costs, seed)
    after = policy.log[30:]  # past learning
    probes = [e for e in after if e.decision.reason is Reason.PROBE]
    spent = sum(e.draft_seconds + e.verify_seconds for e in probes)
    total = sum(e.draft_seconds + e.verify_seconds for e in after)
    assert probes, "the controller probed"
    assert spent <= 1.5 * policy.settings.probe_share * total, "probes stay within their share of the time"
    assert all(e.catch_up <= policy.settings.probe_read for e in probes)


def test_no_round_drafts_more_than_its_costs_justify():
    """Every k the controller chose as best was predicted to beat plain (by the margin overall,
    at least level after the last round), and no longer k was predicted better."""
    policy = Logged()
    for seed in range(2):
        policy.play(_hits(0.8, 200, seed), COMPUTE, seed)
    for e in policy.log:
        d = e.decision
        if d.reason is Reason.BEST and d.k:
            assert d.expected_speedup >= 1.0
            assert max(d.speedup_by_k[: d.k]) == d.expected_speedup
    assert any(e.decision.reason is Reason.BEST and e.k for e in policy.log)


def test_bypassed_plain_steps_are_queued():
    policy = Logged()
    policy.play("0" * 200, QUEUED)
    tail = policy.log[-60:]
    assert sum(e.overlapped for e in tail) >= 50  # choose_ahead committed them to plain
    assert policy.choose_ahead(RoundContext(True, 100, 10)) in (True, False)


def test_it_starts_from_a_sensible_k_before_anything_is_measured():
    """No plain step first: in a short answer that step costs about what a paying draft gains in
    a round, and a pass's price says about what plain's is where drafting pays."""
    policy = AdaptiveDraftLength()
    assert policy.choose(RoundContext(True, 100, 0)).k == policy.settings.start_k
    assert policy.decision().reason is Reason.LEARN, "the controller says it is learning"
    assert policy.wants_draft_prefill()


def test_a_draft_right_on_everything_is_drafted_long_while_learning_and_plain_waits():
    """Where a pass over several tokens costs about one over one, a draft right on all it
    proposes is drafted longer each learning round, and no plain step interrupts it."""
    policy = Logged()
    policy.play("1" * 60)
    learning = [e.k for e in policy.log if e.decision.reason is Reason.LEARN]
    start = policy.settings.start_k
    assert learning[:3] == [start, start + 2, start + 4], "each round right on all it proposed grows"
    assert 0 not in learning, "plain is priced from the passes"


def test_where_a_pass_grows_with_its_tokens_plain_is_timed_within_the_first_answer():
    """On a CPU-like machine a pass over n tokens costs far more than one over one, so plain's
    price cannot be read off the passes: a step of its own is timed early."""
    policy = Logged()
    policy.play(_hits(0.7, 64), COMPUTE)
    plain = [i for i, e in enumerate(policy.log) if e.k == 0]
    assert plain and plain[0] <= 4, [e.k for e in policy.log[:8]]


def test_after_a_round_right_on_everything_it_drafts_longer_than_after_a_miss():
    """Text is right and wrong in runs: the last round tells how long the next should be."""
    rng, hits, right = random.Random(4), [], True
    for _ in range(3000):  # a two-state chain: right 93% after right, 40% after wrong
        right = rng.random() < (0.93 if right else 0.4)
        hits.append("1" if right else "0")
    policy = Logged()
    policy.play("".join(hits), BANDWIDTH)
    after: dict[bool, list[int]] = {True: [], False: []}
    for before, event in zip(policy.log, policy.log[1:]):
        if before.k and event.k and event.decision.reason is Reason.BEST:
            after[before.accepted == before.k].append(event.k)
    assert after[True] and after[False]
    assert sum(after[True]) / len(after[True]) > sum(after[False]) / len(after[False]) + 1.5


def test_plain_is_priced_from_steps_queued_behind_another():
    """The first step of a queue was timed alone (its pass queued behind nothing): it is not
    what a queued plain step costs."""
    policy = Logged()
    policy.play("0" * 120, QUEUED)
    assert policy.queued and all(seconds == pytest.approx(QUEUED.queued) for seconds in policy.queued)


def test_the_first_draft_round_is_timed_where_plain_steps_queue():
    """The first round drafts before any plain step: its draft reads no skipped tokens, so its
    time is a k-token draft's."""
    policy = Logged()
    policy.play("1" * 40, QUEUED)
    assert policy.log[0].k == policy.settings.start_k
    assert policy.log[0].catch_up <= 1 and policy.drafts, "the first draft round is timed"


def test_a_draft_found_too_dear_is_not_learnt_again_when_plain_looks_dearer():
    """Once a plain step shows no acceptance could make it pay, a plain step timed high (a noisy
    pass) does not send the controller back to drafting at learning's lengths."""
    policy = Logged()

    def play(k: int, draft_s: float, verify_s: float) -> None:
        policy.clock.now += draft_s + verify_s
        emitted = tuple(range(k + 1))
        source = Provenance.DRAFT if k else Provenance.MAIN
        policy.observe(
            RoundEvent(0, k, emitted[:k], k, emitted, draft_s, verify_s, source, policy.decision())
        )

    assert policy.choose(RoundContext(True, 100, 0)).k == policy.settings.start_k
    play(3, 0.024, 0.018)  # right on all three, but a draft token costs 0.8 of a main pass
    assert policy.choose(RoundContext(True, 96, 4)).k == 0, "a draft that dear: plain is timed"
    assert policy.decision().reason is Reason.LEARN
    play(0, 0.0, 0.010)
    assert policy.choose(RoundContext(True, 95, 5)).k == 0
    assert policy.decision().reason is Reason.BYPASS
    play(0, 0.0, 0.013)  # plain's median is now 15% dearer than it really is
    assert policy.choose(RoundContext(True, 94, 6)).k == 0
    assert policy.decision().reason is Reason.BYPASS


def test_saved_state_restores_what_was_learnt():
    policy = Logged()
    for seed in range(2):
        policy.play("0" * 200, BANDWIDTH, seed)
    state = json.loads(json.dumps(policy.export_state()))
    fresh = AdaptiveDraftLength()
    assert fresh.restore_state(state)
    assert fresh.export_state() == policy.export_state()
    fresh.choose(RoundContext(True, 100, 0))
    assert fresh.decision().reason in (Reason.BYPASS, Reason.PROBE)  # no learning again
    assert not AdaptiveDraftLength(use_draft=False).restore_state(state)  # another source's


def test_a_state_with_rounds_but_no_prices_times_plain_first():
    """A saved state can hold counts without the seconds behind them: nothing to price a round
    on, so plain is timed before anything is drafted."""
    state = AdaptiveDraftLength().export_state()
    state["counts"] = [0, 0, 1000]
    policy = AdaptiveDraftLength()
    assert policy.restore_state(state)
    assert policy.choose(RoundContext(True, 100, 0)).k == 0


@pytest.mark.parametrize(
    "state",
    [
        None,
        "text",
        {"version": 1, "sources": ["draft"], "record": {}},  # the old controller's
        {"version": 2},
        "broken",
    ],
)
def test_an_old_or_malformed_state_is_ignored(state):
    policy = Logged()
    policy.play(_hits(0.9, 60))
    good = policy.export_state()
    if state == "broken":
        state = {**good, "hits": [-1.0] * MAX_K}
    fresh = AdaptiveDraftLength()
    before = fresh.export_state()
    assert fresh.restore_state(state) is False
    assert fresh.export_state() == before


def test_lookup_proposes_only_where_the_prompt_has_a_match():
    policy = AdaptiveDraftLength(use_draft=False)
    assert policy.choose(RoundContext(False, 100, 0, lookup_len=0)).k == 0
    plan = policy.choose(RoundContext(False, 100, 0, lookup_len=2, lookup=(5, 6)))
    assert plan.source is Provenance.LOOKUP, "without a draft round, lookup supplies the tokens"
    assert 1 <= plan.k <= 2, "no more than the lookup found"
    assert not policy.wants_draft_prefill()


def test_a_draft_almost_never_right_is_named_in_the_decision():
    policy = Logged()
    for seed in range(6):
        policy.play("0" * 400, BANDWIDTH, seed)
    right, judged = policy.decision().draft_right or (None, None)
    assert right == 0, "a draft that is never right is judged so"
    assert judged is not None and judged >= 16, "on at least 16 rounds"
    assert Decision(Reason.BYPASS, 0).bypassed and not Decision(Reason.PROBE, 2).bypassed


@pytest.mark.parametrize("bad", [{"margin": 0.9}, {"max_k": 0}, {"probe_share": 0.9}, {"start_k": 9}])
def test_settings_out_of_bounds_are_refused(bad):
    with pytest.raises(ValueError):
        ControllerSettings(**bad)
