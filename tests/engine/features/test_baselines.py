"""Plain baselines per context bucket: the cache, the measurement, and the worker command."""

from __future__ import annotations

import json
import queue
import threading

import pytest

from app.engine.decoding.events import GenerationFinished
from app.engine.features.baselines import (
    BaselineCache,
    BaselineMeasured,
    Preemptible,
    bucket_label,
    context_bucket,
    measure_plain,
)
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


def test_cache_smooths_per_bucket_and_persists(tmp_path):
    path = tmp_path / "b.json"
    cache = BaselineCache(path)
    assert cache.get("m", 300) is None
    assert cache.add("m", 300, 40.0) == 40.0
    assert cache.add("m", 400, 50.0) == pytest.approx(43.0)  # same bucket (256): smoothed, not replaced
    cache.add("m", 1000, 20.0)
    cache.add("other", 300, 99.0)
    again = BaselineCache(path)
    assert again.get("m", 260) == pytest.approx(43.0)
    assert again.get("m", 700) == 20.0, "a saved rate is read back for its bucket"
    assert again.get("m", 2048) is None, "a bucket never measured has no rate"
    assert again.entries("m")[256].samples == 2
    assert again.get("other", 300) == 99.0
    assert cache.add("m", 300, 0.0) is None and cache.add(None, 300, 10.0) is None


def test_a_damaged_cache_file_reads_as_empty(tmp_path):
    path = tmp_path / "b.json"
    path.write_text('{"baselines": {"m": {"256": {"tok_s": "x"}}}}')
    cache = BaselineCache(path)
    assert cache.get("m", 300) is None
    cache.add("m", 300, 10.0)
    assert json.loads(path.read_text())["baselines"]["m"]["256"]["tok_s"] == 10.0


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
