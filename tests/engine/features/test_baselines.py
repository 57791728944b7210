"""Plain baselines per context bucket: the cache, the measurement, and the worker command."""

from __future__ import annotations

import json
import queue
import random
import threading

import pytest

from app.engine.decoding.events import GenerationFinished
from app.engine.features.baselines import (
    FRESH_FOR,
    BaselineCache,
    BaselineMeasured,
    PlainSample,
    Preemptible,
    bucket_label,
    context_bucket,
    measure_plain,
    read_plain,
)
from app.engine.features.figures import answer_figures
from app.engine.protocol import (
    Generate,
    GenerationContext,
    LoadPair,
    MeasureBaseline,
    PairLoaded,
    SpeculationSettings,
)
from app.engine.worker import EngineWorker


def test_buckets_are_powers_of_two_with_a_floor():
    assert [context_bucket(n) for n in (0, 1, 200, 255, 256, 511, 512, 3000)] == [
        128,
        128,
        128,
        128,
        256,
        256,
        512,
        2048,
    ]
    assert [bucket_label(b) for b in (128, 256, 2048)] == ["under 256", "256–511", "2,048–4,095"]


class _Machine:
    """A fake clock and load average: the conditions a plain measurement and an answer run under."""

    def __init__(self) -> None:
        self.now, self.load = 1_000_000.0, 1.0

    def cache(self, path) -> BaselineCache:
        return BaselineCache(path, load=lambda: self.load, clock=lambda: self.now)


def test_a_speedup_needs_three_plain_measurements_under_the_answers_conditions(tmp_path):
    machine = _Machine()
    cache = machine.cache(tmp_path / "b.json")
    assert cache.reading("m", 300) is None
    assert cache.add("m", 300, 40.0) is None, "one measurement says nothing of its spread"
    machine.now += 60
    assert cache.add("m", 400, 42.0) is None, "two are not enough either (same bucket, 256)"
    machine.now += 60
    reading = cache.add("m", 260, 38.0)
    assert reading is not None and reading.samples == 3
    assert reading.tok_s == pytest.approx(40.0)
    assert reading.low < 40.0 < reading.high, "the range holds the mean"
    assert cache.get("m", 700) is None, "another bucket is another condition"
    assert cache.get("other", 300) is None, "and another model"

    machine.load = 2.5  # the machine got busier: plain would decode slower now
    assert cache.get("m", 300) is None, "a load changed by 1 or more makes the measurements stale"
    machine.load = 1.4
    assert cache.get("m", 300) == pytest.approx(40.0), "a smaller change does not"
    machine.now += FRESH_FOR + 1
    assert cache.get("m", 300) is None, "nor do measurements older than half an hour count"
    assert cache.add("m", 300, 0.0) is None and cache.add(None, 300, 10.0) is None


def test_measurements_persist_with_their_conditions(tmp_path):
    machine = _Machine()
    path = tmp_path / "b.json"
    cache = machine.cache(path)
    for rate in (40.0, 41.0, 39.0):
        cache.add("m", 300, rate)
    again = machine.cache(path)
    assert again.get("m", 300) == pytest.approx(40.0), "read back with when and at what load"
    machine.load = 3.0
    assert again.get("m", 300) is None, "and judged against the conditions of now"


@pytest.mark.parametrize(
    "text",
    [
        '{"baselines": {"m": {"256": {"tok_s": "x"}}}}',
        '{"version": 1, "baselines": {"m": {"256": {"tok_s": 40.0, "samples": 5, "updated": 1}}}}',
        '{"version": 2, "samples": {"m": {"256": [[-1, 0, 1]]}}}',
    ],
)
def test_a_damaged_or_conditionless_cache_file_reads_as_empty(tmp_path, text):
    """A smoothed speed kept without its conditions (the first file format) is measured again."""
    path = tmp_path / "b.json"
    path.write_text(text)
    machine = _Machine()
    cache = machine.cache(path)
    assert cache.get("m", 300) is None
    cache.add("m", 300, 10.0)
    assert json.loads(path.read_text())["samples"]["m"]["256"][0][:1] == [10.0]


def test_the_shown_range_holds_the_true_ratio_when_plain_was_measured_alike():
    """An answer at 1.8x plain's true speed, plain measured three times with 5% timing noise:
    the range shown holds 1.8 in nine trials of ten or more (the range is a 90% one)."""
    rng = random.Random(7)
    true_plain, answer = 20.0, 36.0
    held = 0
    for _ in range(400):
        samples = [PlainSample(true_plain * rng.gauss(1.0, 0.05), 0.0, 1.0) for _ in range(3)]
        reading = read_plain(samples, 1.0, 60.0)
        assert reading is not None
        # the range as every view reads it, from the answer's one record
        shown = answer_figures(
            tokens=64,
            tok_s=answer,
            plain_tok_s=reading.tok_s,
            proposed=40,
            accepted=30,
            drafting_rounds=10,
            plain_range=(reading.low, reading.high),
        ).speedup_range
        assert shown is not None
        held += shown[0] <= answer / true_plain <= shown[1]
    assert held >= 0.88 * 400, held


def test_measure_plain_times_decoding_at_the_asked_context(toy_pair):
    result = measure_plain(toy_pair.main, 300, tokens=24)
    assert isinstance(result, BaselineMeasured) and not result.cancelled
    assert result.context_tokens == 300, "the measurement keeps the context it was asked for"
    assert result.bucket == 256, "it is filed under that context's bucket"
    assert result.tokens == 24, "it timed the asked number of tokens"
    assert result.tok_s is not None and result.tok_s > 0
    assert result.main == toy_pair.main.source


def test_measure_plain_stops_when_other_work_is_waiting(toy_pair):
    waiting = {"n": 0}

    def pending() -> bool:  # becomes true a few checks in, as if the user had sent a message
        waiting["n"] += 1
        return waiting["n"] > 5

    result = measure_plain(toy_pair.main, 200, tokens=5000, cancel=Preemptible(threading.Event(), pending))
    assert result.cancelled, "a measurement cancelled by waiting work says so"
    assert result.tok_s is None, "a cancelled measurement has no rate"
    assert result.tokens < 10, "it stopped within a few tokens"


def _until(inbox: queue.Queue, request: int, kind: type, timeout: float = 120.0) -> list:
    events = []
    while True:
        message = inbox.get(timeout=timeout)
        if message.request == request:
            events.append(message.event)
            if isinstance(message.event, kind):
                return events


def test_worker_measures_reports_context_and_yields_to_a_new_message(toy_models):
    inbox: queue.Queue = queue.Queue()
    worker = EngineWorker(inbox.put)
    worker.start()
    try:
        _until(inbox, worker.submit(LoadPair(str(toy_models.main), str(toy_models.draft))), PairLoaded)
        ask = Generate(
            ({"role": "user", "content": "Write a haiku"},),
            speculation=SpeculationSettings("fixed", 3),
            max_tokens=8,
        )
        events = _until(inbox, worker.submit(ask), GenerationFinished)
        assert isinstance(events[0], GenerationContext)
        assert events[0].prompt_tokens == events[-1].stats.prompt_tokens, (
            "the context is reported with the prompt's length"
        )
        assert events[0].main == str(toy_models.main), "and the loaded main"

        [done] = _until(
            inbox, worker.submit(MeasureBaseline(events[0].prompt_tokens, tokens=16)), BaselineMeasured
        )
        assert done.tok_s, "the measurement gives a rate"
        assert done.tokens == 16, "it timed the asked 16 tokens"
        assert done.bucket == context_bucket(events[0].prompt_tokens), (
            "it is filed under the answer's context bucket"
        )

        long = worker.submit(MeasureBaseline(200, tokens=100_000))
        chat = worker.submit(ask)  # queued behind it: the measurement must give way
        [stopped] = _until(inbox, long, BaselineMeasured)
        assert stopped.cancelled, "a measurement gives way to a queued chat"
        assert stopped.tok_s is None, "a cancelled measurement has no rate"
        assert stopped.tokens < 100_000, "it stopped well before its length"
        assert _until(inbox, chat, GenerationFinished)[-1].reason != "cancelled"

        explicit = worker.submit(MeasureBaseline(200, tokens=100_000))
        cancelled = None
        for _ in range(600):  # cancel again until it lands on the running measurement
            worker.cancel()
            try:
                message = inbox.get(timeout=0.2)
            except queue.Empty:
                continue
            if message.request == explicit:
                cancelled = message.event
                break
        assert isinstance(cancelled, BaselineMeasured) and cancelled.cancelled, (
            "a cancelled measurement says so"
        )
        assert cancelled.tokens < 100_000, "it stopped well before its length"
    finally:
        assert worker.shutdown(timeout=30)
