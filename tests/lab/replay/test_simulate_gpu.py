"""The replay's launch-bound GPU shape ('gpu-4bit'): catch-up reads priced per pass size they
are split into, plain steps queued as the decode loop queues them, and the controller judged
against plain decoding under it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.engine.decoding.events import Reason, RoundEvent
from app.engine.decoding.policy import FixedDraftLength, PlainDecoding, RoundContext
from app.engine.policy.adaptive import AdaptiveDraftLength
from lab.replay.simulate import CostModel, SimulatedClock, replay
from tests.engine.helpers import agreeing_trace

GPU, COMPUTE = CostModel.shaped("gpu-4bit", step=1.0), CostModel.shaped("compute", step=1.0)


def test_a_catch_up_read_costs_a_pass_per_512_tokens_the_rest_padded_into_one():
    def draft(lag: int) -> float:
        return GPU.draft_seconds(2, lag) - GPU.draft_seconds(2, 0)

    assert draft(1) == pytest.approx(0.08)  # pending and one token: one pass of size 2
    assert draft(16) == pytest.approx(16 * 0.08)  # 17 tokens: one pass of 32, padded
    assert draft(124) == pytest.approx(124 * 0.08)  # 125: one pass of 128
    assert draft(600) == pytest.approx(2.0 + 600 * 0.08)  # 601 = 512 + 89 padded to 128
    assert COMPUTE.draft_seconds(2, 16) == pytest.approx(0.15 * 2 + 0.12 + 0.12 * 16)  # per token, unchanged


class _Spy(PlainDecoding):
    def __init__(self) -> None:
        self.events: list[RoundEvent] = []

    def observe(self, event: RoundEvent) -> None:
        self.events.append(event)


def test_plain_steps_are_queued_only_under_a_shape_that_queues_them():
    trace = agreeing_trace(0.0, seed=1, n=10)
    spy = _Spy()
    queued = replay(trace, spy, GPU)
    # the first step is timed alone (its sync), the nine after it queued under the one before
    assert queued.seconds == pytest.approx(GPU.verify[0] + GPU.overhead + 9 * GPU.queued)
    assert all(e.overlapped for e in spy.events)
    spy = _Spy()
    alone = replay(trace, spy, COMPUTE)
    assert alone.seconds == pytest.approx(10 * (COMPUTE.verify[0] + COMPUTE.overhead))
    assert not any(e.overlapped for e in spy.events)


class _Queues(AdaptiveDraftLength):
    """The controller, noting for every round whether it queued the next one."""

    def choose_ahead(self, context: RoundContext) -> bool:
        self.ahead = super().choose_ahead(context)
        return self.ahead

    def observe(self, event: RoundEvent) -> None:
        self.log.append((event, getattr(self, "ahead", False)))
        self.ahead = False
        super().observe(event)


@pytest.mark.parametrize("p_hit", [0.0, 0.9])
def test_a_bypassed_draft_decodes_on_queued_steps_within_a_few_percent_of_plain(p_hit):
    """Where no draft length pays (a 7B 4-bit pair on an H100: fixed k 0.4-0.7x plain), the
    controller's own choices cost a few percent: its first answer's learning and a probe now
    and then. Every other bypassed step is queued under the one before, as plain decoding's are."""
    clock = SimulatedClock()
    policy = _Queues(clock=clock)
    policy.log = []
    traces = [agreeing_trace(p_hit, seed=i) for i in range(6)]
    ratios = []
    for trace in traces:
        policy.log.clear()
        mine = replay(trace, policy, GPU, clock=clock)
        ratios.append(replay(trace, PlainDecoding(), GPU).seconds / mine.seconds)
        log = policy.log
        # a plain round not queued under the plain round before: only the one after a probe
        unqueued = sum(
            1 for (e0, _), (e1, _) in zip(log, log[1:]) if e0.k == 0 and e1.k == 0 and not e1.overlapped
        )
        assert unqueued <= 1 + sum(e.k > 0 for e, _ in log), unqueued
    # a probe (k = 2 and a 16-token read, ~7 plain steps) costs the 128-token answer holding it 6%
    assert min(ratios[1:]) >= 0.93, ratios
    assert sum(ratios[1:]) / len(ratios[1:]) >= 0.97, ratios
    assert ratios[0] >= 0.9, (
        ratios
    )  # the first answer learns the draft (saved state spares the next sessions)


def test_a_draft_that_does_not_pay_on_a_gpu_is_probed_rarely_from_the_first_answer():
    """A 4-bit pair's draft at 0.6 plain steps a token: a probe costs its passes and the queued
    step the round after it, about 3 plain steps as played. Priced as measured, probes stay rare
    and a fresh pair's answers keep close to plain."""
    costs = replace(GPU, draft_step=0.6)
    probes, ratios = 0, []
    for seed in range(6):
        trace = agreeing_trace(0.9, seed=seed)
        clock = SimulatedClock()
        policy = _Queues(clock=clock)
        policy.log = []
        mine = replay(trace, policy, costs, clock=clock)
        probes += sum(e.decision.reason is Reason.PROBE for e, _ in policy.log)
        ratios.append(replay(trace, PlainDecoding(), costs).seconds / mine.seconds)
    assert probes <= 6, probes
    assert sum(ratios) / len(ratios) >= 0.94, ratios


def test_probes_reading_all_they_skipped_are_spaced_by_what_they_measured():
    """A draft right 90% of the time but too dear to pay (a draft step of half a plain one) on a
    4-bit pair: a probe's read of skipped tokens costs several plain steps more than its passes,
    so probes are spaced by whole probes as measured, catch-up included, and keep to the budget."""
    costs = replace(GPU, draft_step=0.5)
    clock = SimulatedClock()
    policy = _Queues(clock=clock)
    policy.log = []
    probes, ratios = 0, []
    for seed in range(12):
        trace = agreeing_trace(0.9, seed=seed)
        policy.log.clear()
        mine = replay(trace, policy, costs, clock=clock)
        probes += sum(e.decision.reason is Reason.PROBE and e.k > 0 for e, _ in policy.log)
        ratios.append(replay(trace, PlainDecoding(), costs).seconds / mine.seconds)
    later = ratios[1:]
    assert probes <= 6, probes
    assert sum(later) / len(later) >= 0.97, ratios
    assert min(later) >= 0.94, ratios


@pytest.mark.parametrize("first_slow", [3, 4, 5])
def test_plain_steps_caught_in_a_stall_while_first_queued_do_not_keep_a_losing_draft_in(first_slow):
    """Seen on an H100 (a 7B 4-bit pair whose draft never pays): three queued plain steps timed
    in a stall priced plain at 2.7 times a step timed alone, and the controller drafted k = 7
    through every answer at 0.53-0.85x plain, since queued steps are timed only while it sits out."""
    clock = SimulatedClock()
    policy = AdaptiveDraftLength(clock=clock)
    slow = {r: 5.0 for r in range(first_slow, first_slow + 3)}
    ratios = []
    for i in range(6):
        trace = agreeing_trace(0.9, seed=i)
        mine = replay(trace, policy, GPU, clock=clock, slow=slow if i == 0 else None)
        ratios.append(replay(trace, PlainDecoding(), GPU).seconds / (mine.seconds - mine.slow_seconds))
    assert min(ratios[1:]) >= 0.93, ratios
    assert sum(ratios[1:]) / len(ratios[1:]) >= 0.96, ratios


# rounds a shared H100 host stalled in five plain answers of run R (7B 4-bit pair), as multiples
# of the answer's median step (docs/measurements/archive/2026-11-26-host-stalls.md)
HOST_STALLS = (
    {
        43: 5.7,
        44: 2.3,
        45: 1.8,
        46: 1.5,
        49: 5.1,
        50: 2.1,
        51: 1.6,
        66: 2.5,
        67: 1.6,
        73: 3.1,
        74: 2.5,
        75: 1.7,
    },
    {26: 5.3, 27: 2.4, 28: 1.8, 29: 4.5, 30: 2.7, 31: 1.8, 46: 2.2, 47: 1.8, 51: 2.9, 52: 2.7, 53: 1.7},
    {27: 6.2, 28: 2.1, 29: 5.2, 30: 1.9, 44: 1.7, 58: 1.8, 65: 1.6},
    {69: 5.7, 70: 3.1, 71: 2.0, 72: 3.5, 73: 3.7, 74: 1.9, 82: 4.2, 83: 2.2, 84: 1.7},
    {5: 5.2, 6: 2.6, 7: 1.8, 8: 1.9, 9: 4.9, 10: 2.1, 11: 1.6, 28: 2.0, 29: 2.1, 32: 3.8, 33: 1.9},
)


def test_bursts_of_host_stalls_in_queued_plain_steps_do_not_call_a_losing_draft_in():
    """Seen on an H100 (run R, a 7B 4-bit pair whose draft never pays): a shared host stalls
    plain steps in bursts, 2-6 times a step for a few rounds, one or two bursts an answer. Three
    of five stretches of queued steps caught in them priced plain at twice its cost, and the
    controller drafted k = 7 mid-answer, reading 138 skipped tokens (13 plain steps). Stalls hit
    drafting rounds as much, so they say nothing about what a draft buys."""
    clock = SimulatedClock()
    policy = _Queues(clock=clock)
    policy.log = []
    ratios, drafted = [], []
    for i, stalls in enumerate([None, *HOST_STALLS, *HOST_STALLS]):
        trace = agreeing_trace(0.9, seed=i)
        policy.log.clear()
        mine = replay(trace, policy, GPU, clock=clock, slow=stalls)
        ratios.append(replay(trace, PlainDecoding(), GPU).seconds / (mine.seconds - mine.slow_seconds))
        drafted.append(sum(e.k > 0 for e, _ in policy.log))
    assert max(drafted[1:]) <= 1, (drafted, ratios)  # a probe at most
    assert min(ratios[1:]) >= 0.95, ratios


# the 14B bf16 pair on an H200 at agreement 0.9 (docs/performance.md): a flat verify pass of 24 ms,
# a draft token 6.65 ms plus 5.7 ms a round, plain 16.7 ms a step queued and 15.2 ms alone
H200_14B = CostModel(
    verify=(0.0152,) + (0.024,) * 8,
    draft_step=0.00665,
    draft_fixed=0.0057,
    draft_read=0.0003,
    overhead=0.00035,
    noise=0.1,
    queued=0.0167,
)


def test_a_slow_first_answer_does_not_keep_a_paying_draft_out():
    """Seen on an H200 (14B bf16 pair, agreement 0.9, where only k = 8 pays): every mode's first
    answer ran slower than later ones (the draft's rounds by about half, the main's passes by a
    third, plain by a fifth); the controller learnt there, priced drafting too dear, and sat out
    five of six prompts. Learning that drafts long on a hopeful reading keeps the draft in."""
    slow = replace(
        H200_14B,
        verify=tuple(v * 1.35 for v in H200_14B.verify),
        queued=H200_14B.queued * 1.2,
        draft_step=H200_14B.draft_step * 1.5,
        draft_fixed=H200_14B.draft_fixed * 1.5,
    )
    clock = SimulatedClock()
    policy = AdaptiveDraftLength(clock=clock)
    mine = plain = fixed8 = 0.0
    for i in range(18):
        trace = agreeing_trace(0.9, seed=i)
        costs = slow if i == 0 else H200_14B
        seconds = replay(trace, policy, costs, clock=clock, seed=i).seconds
        if i:
            mine += seconds
            plain += replay(trace, PlainDecoding(), costs, seed=i).seconds
            fixed8 += replay(trace, FixedDraftLength(8), costs, seed=i).seconds
    assert fixed8 / mine >= 0.9  # 0.95 where the first answer is as fast as the rest
