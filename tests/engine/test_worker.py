"""The worker thread owns MLX: callers only submit commands and read messages."""

from __future__ import annotations

import queue
import threading

from app.engine.decoding.events import EngineError, GenerationFinished, TokenEvent, WarmUpProgress
from app.engine.decoding.shapes.buckets import PASS_SIZES
from app.engine.policy.warmup import compiles_per_shape
from app.engine.protocol import Generate, LoadPair, PairLoaded, SpeculationSettings
from app.engine.worker import EngineWorker


def _collect(worker_queue: queue.Queue, request: int, until, timeout: float = 120.0) -> list:
    events = []
    while True:
        message = worker_queue.get(timeout=timeout)
        if message.request != request:
            continue
        events.append(message.event)
        if until(message.event):
            return events


def _is_final(event) -> bool:
    return isinstance(event, (GenerationFinished, EngineError, PairLoaded)) and not (
        isinstance(event, EngineError) and event.kind == "notice"
    )


def test_worker_loads_generates_cancels_and_shuts_down(toy_models):
    inbox: queue.Queue = queue.Queue()
    threads: set[str] = set()

    def emit(message):
        threads.add(threading.current_thread().name)
        inbox.put(message)

    worker = EngineWorker(emit)
    worker.start()
    try:
        bad = worker.submit(LoadPair("/nonexistent/model"))
        [error] = _collect(inbox, bad, _is_final)
        assert isinstance(error, EngineError) and error.kind == "load", "a missing model is a load error"
        assert "/nonexistent/model" in error.message, "the error names the path"

        early = worker.submit(Generate(({"role": "user", "content": "hi"},)))
        [state] = _collect(inbox, early, _is_final)
        assert isinstance(state, EngineError) and "no model" in state.message

        load = worker.submit(LoadPair(str(toy_models.main), str(toy_models.draft)))
        [loaded] = _collect(inbox, load, _is_final)
        assert isinstance(loaded, PairLoaded) and loaded.speculation_refusal is None

        ask = Generate(
            ({"role": "user", "content": "Write a haiku"},),
            speculation=SpeculationSettings("fixed", 3),
            max_tokens=24,
        )
        events = _collect(inbox, worker.submit(ask), _is_final)
        done = events[-1]
        assert isinstance(done, GenerationFinished) and done.stats.tokens > 0
        assert "".join(e.text for e in events if isinstance(e, TokenEvent)) + done.tail == done.text

        long = Generate(({"role": "user", "content": "Tell a long story"},), max_tokens=5000)
        request = worker.submit(long)
        first = inbox.get(timeout=120)
        while not isinstance(first.event, TokenEvent):
            first = inbox.get(timeout=120)
        worker.cancel()
        events = _collect(inbox, request, _is_final)
        assert events[-1].reason == "cancelled", "a cancel ends the answer as cancelled"
        assert events[-1].stats.tokens < 5000, "the answer stopped well before its length"
    finally:
        assert worker.shutdown(timeout=30)
    assert threads == {"specchat-engine"}


def test_a_request_cancelled_before_it_starts_ends_at_once_and_spares_the_running_one(toy_models):
    """Stop pressed while the worker is still busy: that answer must not run to its end (and
    keep the next one waiting), and the command that runs must not be the one stopped."""
    inbox: queue.Queue = queue.Queue()
    worker = EngineWorker(inbox.put)
    worker.start()
    try:
        [loaded] = _collect(
            inbox, worker.submit(LoadPair(str(toy_models.main), str(toy_models.draft))), _is_final
        )
        assert isinstance(loaded, PairLoaded)
        running = worker.submit(
            Generate(({"role": "user", "content": "Tell a long story"},), max_tokens=5000)
        )
        waiting = worker.submit(Generate(({"role": "user", "content": "Write a haiku"},), max_tokens=2000))
        first = inbox.get(timeout=120)
        while not isinstance(first.event, TokenEvent):
            first = inbox.get(timeout=120)
        worker.cancel(waiting)
        seen = 0
        while seen < 20:  # the running answer goes on
            message = inbox.get(timeout=120)
            assert message.request == running and not isinstance(message.event, GenerationFinished)
            seen += isinstance(message.event, TokenEvent)
        worker.cancel(running)
        assert _collect(inbox, running, _is_final)[-1].reason == "cancelled"
        done = _collect(inbox, waiting, _is_final)[-1]
        assert isinstance(done, GenerationFinished) and done.reason == "cancelled", (
            "a cancel before the first token ends the answer as cancelled"
        )
        assert done.stats.tokens == 0, "with no tokens"
    finally:
        assert worker.shutdown(timeout=30)


def test_a_pair_loaded_for_a_gpu_compiles_every_draft_length_before_it_is_reported_loaded(
    toy_models, monkeypatch
):
    """Compile time belongs to loading (with progress), not to the first answer's prices: a
    GPU's first pass at each shape cost 2-10 times the next and misled the controller. Work
    queued behind the warm-up stops it, and the pair is loaded all the same."""
    played: list[int] = []
    import app.engine.policy.warmup as warmup

    real = warmup.generate

    def spy(session, prompt, *, policy, **kw):
        played.append(policy.k)
        yield from real(session, prompt, policy=policy, **kw)

    monkeypatch.setattr(warmup, "generate", spy)
    inbox: queue.Queue = queue.Queue()
    worker = EngineWorker(inbox.put)
    worker.start()
    try:
        load = worker.submit(LoadPair(str(toy_models.main), str(toy_models.draft), warm_up=True))
        events = _collect(inbox, load, _is_final)
        total = 8 + 2 * len(PASS_SIZES)  # a round per draft length, a read per pass size and model
        assert [(e.done, e.total) for e in events[:-1]] == [(i, total) for i in range(total + 1)]
        assert isinstance(events[-1], PairLoaded), "the pair loads after its warm-up"
        assert played == list(range(1, 9)), "the warm-up plays every draft length from 1 to 8"

        played.clear()
        again = worker.submit(LoadPair(str(toy_models.main), str(toy_models.draft), warm_up=True))
        ask = worker.submit(Generate(({"role": "user", "content": "hi"},), max_tokens=8))  # waits behind it
        events = _collect(inbox, again, _is_final)
        assert isinstance(events[-1], PairLoaded), "the pair loads"
        assert len(played) < 8, "the warm-up stopped early for the waiting answer"
        assert isinstance(_collect(inbox, ask, _is_final)[-1], GenerationFinished)

        plain = worker.submit(LoadPair(str(toy_models.main), None, warm_up=True))  # nothing to compile for
        assert [type(e) for e in _collect(inbox, plain, _is_final)] == [PairLoaded]
        device = worker.submit(LoadPair(str(toy_models.main), str(toy_models.draft)))  # the device decides
        warmed = any(isinstance(e, WarmUpProgress) for e in _collect(inbox, device, _is_final))
        assert warmed is compiles_per_shape()
    finally:
        assert worker.shutdown(timeout=30)
