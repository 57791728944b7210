"""One-time costs (a pass shape's kernels compiled on its first run) are kept out of the
controller's costs, once per shape, and replays show what they would do to its choices."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.decoding.events import Provenance, RoundEvent
from app.engine.decoding.policy import RoundContext
from app.engine.measure.one_time import compare_slow_round
from app.engine.measure.replay import CostModel, SimulatedClock, load_traces
from app.engine.policy.adaptive import AdaptiveDraftLength
from app.engine.policy.config import AdaptiveConfig
from app.engine.policy.costs import RecentMedian
from app.engine.policy.one_time import ceiling

STEP = 0.01  # a plain step, seconds
TRACES = load_traces(Path(__file__).parents[1] / "data" / "draft_right_80.json")[0]


def _round(k: int, factor: float = 1.0, catch_up: int = 0, index: int = 0) -> RoundEvent:
    """A draft round of k proposals, all accepted, its passes `factor` times their usual time."""
    return RoundEvent(
        index=index,
        k=k,
        proposed=(7,) * k,
        accepted=k,
        emitted=(7,) * (k + 1),
        draft_seconds=factor * 0.3 * STEP * k,
        verify_seconds=factor * STEP * (1 + 0.05 * k),
        source=Provenance.DRAFT if k else Provenance.MAIN,
        catch_up=catch_up,
    )


def _controller(**options: object) -> tuple[AdaptiveDraftLength, SimulatedClock]:
    """A controller that has timed plain steps and draft rounds of 2 and 3 proposals."""
    clock = SimulatedClock()
    policy = AdaptiveDraftLength(AdaptiveConfig(**options), clock=clock)  # type: ignore[arg-type]
    for k in (0, 3, 0, 2, 3, 0, 2, 3):
        observe(policy, clock, _round(k))
    return policy, clock


def observe(policy: AdaptiveDraftLength, clock: SimulatedClock, event: RoundEvent) -> None:
    clock.now += event.draft_seconds + event.verify_seconds
    policy.observe(event)


def _samples(policy: AdaptiveDraftLength) -> tuple[dict[int, int], dict[int, int], int]:
    """How many passes each cost was learnt from: verify by size, drafting by k, overhead."""
    verify = {n: m.count for n, m in policy.verify.by_n.items()}
    drafting = {k: m.count for k, m in policy.drafting[Provenance.DRAFT].by_n.items()}
    return verify, drafting, policy.overhead.count


def _median(*samples: float) -> RecentMedian:
    m = RecentMedian()
    for x in samples:
        m.add(x)
    return m


def test_the_ceiling_is_a_measured_size_or_the_next_larger_or_the_largest_scaled_up():
    by_n = {1: _median(1.0), 2: _median(1.2), 4: _median(1.5)}
    assert ceiling(by_n, 2) == 1.2
    assert ceiling(by_n, 3) == 1.5  # never above a larger size's price
    assert ceiling(by_n, 8) == pytest.approx(3.0)  # never above in proportion to the largest
    assert ceiling({}, 3) is None


def test_a_round_a_hundred_times_its_price_is_left_out_of_every_cost_and_recorded():
    policy, clock = _controller()
    before = _samples(policy)
    observe(policy, clock, _round(3, factor=100.0, catch_up=1))
    assert _samples(policy) == before
    slow = policy.one_time.last
    assert slow is not None and policy.one_time.left_out == 1
    assert (slow.k, slow.source, slow.draft_tokens, slow.main_tokens) == (3, Provenance.DRAFT, 4, 4)
    assert slow.position == 3 * 1 + 2 * 3 + 3 * 4  # the tokens the timed rounds emitted before it
    assert slow.seconds == pytest.approx(100 * (0.9 + 1.15) * STEP)
    assert slow.predicted_seconds == pytest.approx((0.9 + 1.15) * STEP)
    policy.choose(RoundContext(has_draft=True, remaining=100, position=0))
    assert policy.snapshot()["slow_rounds_left_out"] == 1


def test_a_shape_is_excused_once_a_second_slow_round_of_it_is_its_cost():
    """A size that really costs more than its neighbours (or a machine that slowed down) must
    be learnt: only the first slow round of a shape is left out."""
    policy, clock = _controller()
    observe(policy, clock, _round(3, factor=100.0))
    before = _samples(policy)
    observe(policy, clock, _round(3, factor=100.0))
    assert policy.one_time.last is None and policy.one_time.left_out == 1
    assert _samples(policy)[0][4] == before[0][4] + 1
    observe(policy, clock, _round(2, factor=100.0))  # another shape has its own first slow round
    assert policy.one_time.left_out == 2


def test_a_round_just_over_three_times_its_price_but_by_little_time_counts():
    """Noise on a fast step (a few milliseconds) is the median's business, not a one-time cost."""
    policy, clock = _controller()
    observe(policy, clock, _round(2, factor=4.0))  # about 0.05 s over its price: under the floor
    assert policy.one_time.last is None and policy.one_time.left_out == 0
    policy, clock = _controller(one_time_floor=0.01)
    observe(policy, clock, _round(2, factor=4.0))
    assert policy.one_time.left_out == 1


def test_with_the_rule_off_every_round_is_taken_in():
    policy, clock = _controller(one_time_factor=None)
    before = _samples(policy)
    observe(policy, clock, _round(3, factor=100.0))
    assert policy.one_time.left_out == 0 and _samples(policy) != before


def test_nothing_is_judged_before_a_plain_step_prices_the_rest():
    clock = SimulatedClock()
    policy = AdaptiveDraftLength(clock=clock)
    observe(policy, clock, _round(3, factor=100.0))
    assert policy.one_time.left_out == 0


def test_replayed_a_slow_plain_step_leaves_the_choices_as_they_were_with_the_rule_on():
    """Replay, no timing noise: the first answer's first plain step after the exploring one (the
    reference plain step still rests on one sample) takes 100 times its time under the CPU-like
    shape. Taken in, it makes plain decoding look 50 times dearer, and the controller drafts where
    the draft loses; left out, every choice is the one made without the slow round."""
    shape = CostModel.shaped("compute")
    _, (unslowed, *_) = compare_slow_round(TRACES, shape, 0, 1.0)
    second_plain = unslowed.result.choices.index(("main", 0), 3)
    plain, (none, on, off) = compare_slow_round(TRACES, shape, second_plain, 100.0)
    assert on.left_out == 1 and on.differ == 0
    assert on.result.choices == none.result.choices
    assert on.speed(plain) == pytest.approx(none.speed(plain))
    assert off.left_out == 0 and off.differ > 150
    assert off.speed(plain) < 0.9 * none.speed(plain)


def test_replayed_a_slow_draft_round_does_not_make_a_paying_draft_look_dear():
    """The GPU-like shape, where this draft pays 1.37x plain: the first answer's round 18, the
    second pass at k = 1, takes 100 times its time. Taken in, the median of that size's two
    passes prices every draft length dear and the draft sits out until those prices go stale
    and are played again (recheck.py); left out, the controller keeps drafting (one sample fewer
    moves a few close calls: within 3%)."""
    plain, (none, on, off) = compare_slow_round(TRACES, CostModel.shaped("bandwidth"), 18, 100.0)
    assert none.result.choices[18] == ("draft", 1)
    assert none.result.plans[("main", 0)] < 10
    assert off.result.plans[("main", 0)] > 50
    assert off.speed(plain) < 0.95 * none.speed(plain)
    assert on.left_out == 1 and on.result.plans[("main", 0)] < 10
    assert on.speed(plain) >= 0.97 * none.speed(plain)


def test_a_catch_up_is_a_shape_of_its_own():
    """A draft reading what it skipped feeds its first step many tokens: its compile does not
    use up the excuse of an ordinary round of the same k."""
    policy, clock = _controller()
    observe(policy, clock, _round(2, factor=100.0, catch_up=16))
    observe(policy, clock, _round(2, factor=100.0))
    assert policy.one_time.left_out == 2
