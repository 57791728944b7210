"""What the adaptive controller learnt survives a restart of the app, and nothing else gets in."""

from __future__ import annotations

import json
import math
import queue
from pathlib import Path

import pytest

from app.engine.decoding.events import GenerationFinished, RoundEvent
from app.engine.decoding.policy import RoundContext
from app.engine.library.store import Store
from app.engine.measure.replay import CostModel, SimulatedClock, load_traces, replay
from app.engine.policy.adaptive import AdaptiveDraftLength
from app.engine.policy.controller_state import export_state, restore_state
from app.engine.protocol import Generate, LoadPair, PairLoaded, SpeculationSettings
from app.engine.worker import EngineWorker
from tests.engine.helpers import agreeing_trace

TRACES = Path(__file__).parents[1] / "data" / "qwen_coder_traces.json"
CONTEXT = RoundContext(has_draft=True, remaining=100, position=0, lookup_len=0, lookup=())


def _trained() -> AdaptiveDraftLength:
    """A controller after the real pair's recorded answers, on the bandwidth cost shape."""
    traces, _ = load_traces(TRACES)
    clock = SimulatedClock()
    policy = AdaptiveDraftLength(clock=clock)
    for trace in traces:
        replay(trace, policy, CostModel.shaped("bandwidth"), clock=clock)
    return policy


def test_a_restored_controller_holds_the_same_state_and_skips_exploring():
    trained = _trained()
    saved = json.loads(json.dumps(export_state(trained)))  # through the store's JSON
    fresh = AdaptiveDraftLength()
    assert restore_state(fresh, saved)
    assert export_state(fresh) == saved
    # the next answer, in either: the same estimates and costs, so the same prices for every k
    for policy in (trained, fresh):
        policy.begin_answer()
        policy.choose(CONTEXT)
    assert fresh.snapshot()["why"] != "explore"
    mine, theirs = fresh.snapshot()["speedup_by_k"], trained.snapshot()["speedup_by_k"]
    assert mine.keys() == theirs.keys() and all(mine[s] == pytest.approx(theirs[s]) for s in mine)
    assert fresh.snapshot()["acceptance"] == trained.snapshot()["acceptance"]
    # a controller that was never restored explores first
    first = AdaptiveDraftLength()
    first.choose(CONTEXT)
    assert first.snapshot()["why"] == "explore"


def test_a_restored_controller_prices_plain_as_its_loop_queues_it():
    """Where the loop queues plain steps (a GPU), a bypassed draft is priced against them, which
    cost less than a step timed alone. Restored without them, a 4-bit pair's controller priced
    plain at a step alone and drafted k = 4 through its first answer, 1.2x slower than the
    controller it was saved from."""
    clock = SimulatedClock()
    trained = AdaptiveDraftLength(clock=clock)
    for seed in range(3):
        replay(agreeing_trace(0.9, seed=seed), trained, CostModel.shaped("gpu-4bit"), clock=clock)
    assert trained.queued_plain.rounds >= 3
    fresh = AdaptiveDraftLength()
    assert restore_state(fresh, json.loads(json.dumps(export_state(trained))))
    step = trained.verify.plain.value
    assert fresh.plain_seconds(step) == pytest.approx(trained.plain_seconds(step))
    assert fresh.plain_seconds(step) < fresh._plain_round(step)  # queued: cheaper than alone
    for policy in (trained, fresh):
        policy.begin_answer()
        policy.choose(CONTEXT)
    mine, theirs = fresh.snapshot()["speedup_by_k"], trained.snapshot()["speedup_by_k"]
    assert all(mine[s] == pytest.approx(theirs[s]) for s in mine)


@pytest.mark.parametrize(
    "damage",
    [
        lambda s: None,
        lambda s: {},
        lambda s: {**s, "version": 99},
        lambda s: {**s, "sources": ["lookup"]},  # saved with a draft, restored into lookup alone
        lambda s: {**s, "record": {"hits": [math.nan] * 8, "trials": [1.0] * 8}},
        lambda s: {**s, "overhead": {"samples": [-1.0], "count": 1}},
        lambda s: {
            **s,
            "verify": {"plain": s["verify"]["plain"], "by_n": {"0": {"samples": [1.0], "count": 1}}},
        },
        lambda s: {**s, "link": {"hits": [1.0], "trials": [1.0]}},
        lambda s: {**s, "played": {"draft": "many"}},
        lambda s: {**s, "played": {"draft": -1, "lookup": 3}},
        lambda s: {**s, "verdicts": [3, 5]},  # more right than judged
        lambda s: {**s, "verdicts": "many"},
        lambda s: {**s, "queued_plain": {"samples": [-0.5], "count": 1, "rounds": 3}},
        lambda s: {**s, "queued_plain": {"samples": [0.7], "count": 1, "rounds": -1}},
    ],
)
def test_a_state_that_does_not_fit_is_ignored_whole(damage):
    saved = damage(export_state(_trained()))
    policy = AdaptiveDraftLength()
    untouched = export_state(policy)
    assert restore_state(policy, saved) is False
    assert export_state(policy) == untouched


def test_the_worker_saves_after_an_answer_and_the_next_session_starts_from_it(toy_models, tmp_path):
    store = Store(tmp_path / "library.sqlite3")
    ask = Generate(
        ({"role": "user", "content": "Write a haiku"},),
        speculation=SpeculationSettings("adaptive"),
        max_tokens=16,
    )

    def session(draft: str) -> list[RoundEvent]:
        inbox: queue.Queue = queue.Queue()
        worker = EngineWorker(inbox.put, memory=store)
        worker.start()
        try:
            worker.submit(LoadPair(str(toy_models.main), draft))
            worker.submit(ask)
            rounds = []
            while True:
                event = inbox.get(timeout=120).event
                assert not isinstance(event, PairLoaded) or event.speculation_refusal is None
                if isinstance(event, RoundEvent):
                    rounds.append(event)
                if isinstance(event, GenerationFinished):
                    return rounds
        finally:
            assert worker.shutdown(timeout=30)

    first = session(str(toy_models.draft))
    assert first[0].policy["why"] == "explore"
    again = session(str(toy_models.draft))
    assert again[0].policy["why"] != "explore"  # this pair was learnt in the last session
    other = session(str(toy_models.draft_random))
    assert other[0].policy["why"] == "explore"  # another draft starts from nothing
