"""A new load replaces what the worker is doing: an answer, the arena or a measurement stops at
its next safe point, and the load says what it waits for."""

from __future__ import annotations

import queue
import time

import pytest

from app.engine.protocol import (
    ArenaFinished,
    ArenaProgress,
    BenchPrompt,
    EngineError,
    Generate,
    GenerationFinished,
    LoadPair,
    LoadQueued,
    LoadStarted,
    PairLoaded,
    RunArena,
    TokenEvent,
    WorkerMessage,
)
from app.engine.worker import EngineWorker

STORY = ({"role": "user", "content": "Tell a long story"},)


class Inbox:
    """The worker's messages, kept per request until a test reads them."""

    def __init__(self) -> None:
        self.arrived: queue.Queue[WorkerMessage] = queue.Queue()
        self.kept: dict[int, list] = {}

    def next(self, request: int):
        while not self.kept.get(request):
            message = self.arrived.get(timeout=120)
            self.kept.setdefault(message.request, []).append(message.event)
        return self.kept[request].pop(0)


@pytest.fixture
def worker(toy_models):
    inbox = Inbox()
    w = EngineWorker(inbox.arrived.put)
    w.start()
    w.inbox = inbox  # type: ignore[attr-defined]
    yield w
    assert w.shutdown(timeout=30)


def events_of(worker, request: int, final: tuple[type, ...]) -> list:
    events = [worker.inbox.next(request)]
    while not isinstance(events[-1], final):
        events.append(worker.inbox.next(request))
    return events


def first(worker, request: int, kind: type) -> None:
    while not isinstance(worker.inbox.next(request), kind):
        pass


def slow_loads(monkeypatch) -> None:
    """Every load takes 1.5 s more: a big model on a slow disk."""
    import app.engine.worker as module

    real = module.load_checked_pair

    def slow(*args, **kwargs):
        time.sleep(1.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "load_checked_pair", slow)


def load(worker, main, draft=None) -> None:
    request = worker.submit(LoadPair(str(main), str(draft) if draft else None, warm_up=False))
    assert isinstance(events_of(worker, request, (PairLoaded, EngineError))[-1], PairLoaded)


def test_a_load_while_answering_stops_the_answer_and_says_it_waits(worker, toy_models):
    load(worker, toy_models.main, toy_models.draft)
    answer = worker.submit(Generate(STORY, max_tokens=5000))
    first(worker, answer, TokenEvent)
    again = worker.submit(LoadPair(str(toy_models.main), None, warm_up=False))
    done = events_of(worker, answer, (GenerationFinished,))[-1]
    assert done.reason == "cancelled", "a load cancels the running answer"
    assert 0 < done.stats.tokens < 5000, "the answer stopped after some tokens, well before its length"
    loaded = events_of(worker, again, (PairLoaded, EngineError))[-1]
    assert isinstance(loaded, PairLoaded) and loaded.draft is None


def test_a_load_that_waits_says_for_what_and_when_it_begins(worker, toy_models, monkeypatch):
    """A load replaces one that runs: that one stops between two tensors, and the next says
    it waits once the wait is more than a moment."""
    slow_loads(monkeypatch)
    running = worker.submit(LoadPair(str(toy_models.main), str(toy_models.draft), warm_up=False))
    time.sleep(0.2)  # the first load has begun
    waiting = worker.submit(LoadPair(str(toy_models.main), None, warm_up=False))
    stopped = events_of(worker, running, (PairLoaded, EngineError))[-1]
    assert isinstance(stopped, EngineError) and "cancelled" in stopped.message, "the first load stopped"
    events = events_of(worker, waiting, (PairLoaded, EngineError))
    assert [type(e) for e in events] == [LoadQueued, LoadStarted, PairLoaded]
    assert events[0].stopping, "the waiting load says it is stopping the one that runs"
    assert events[-1].draft is None, "the pair loads without a draft"


def test_a_load_stops_an_arena_run(worker, toy_models):
    load(worker, toy_models.main, toy_models.draft)
    prompts = tuple(BenchPrompt(f"p{i}", "chat", "Tell a long story about the sea") for i in range(6))
    arena = worker.submit(
        RunArena(str(toy_models.main), (str(toy_models.draft),), prompts, max_tokens=400, save=False)
    )
    first(worker, arena, ArenaProgress)
    again = worker.submit(LoadPair(str(toy_models.main), None, warm_up=False))
    finished = events_of(worker, arena, (ArenaFinished,))[-1]
    assert finished.cancelled
    assert isinstance(events_of(worker, again, (PairLoaded, EngineError))[-1], PairLoaded)


def test_a_load_replaced_before_it_began_is_skipped(worker, toy_models, monkeypatch):
    """Picking one pair and then another while a load runs loads only the second."""
    slow_loads(monkeypatch)
    running = worker.submit(LoadPair(str(toy_models.main), None, warm_up=False))
    time.sleep(0.2)
    skipped = worker.submit(LoadPair(str(toy_models.main), str(toy_models.draft_random), warm_up=False))
    wanted = worker.submit(LoadPair(str(toy_models.main), str(toy_models.draft), warm_up=False))
    assert isinstance(events_of(worker, running, (PairLoaded, EngineError))[-1], EngineError)
    error = events_of(worker, skipped, (PairLoaded, EngineError))[-1]
    assert isinstance(error, EngineError) and error.kind == "state"
    assert "cancelled before it began" in error.message
    loaded = events_of(worker, wanted, (PairLoaded, EngineError))[-1]
    assert isinstance(loaded, PairLoaded) and loaded.draft == str(toy_models.draft)


def test_an_idle_worker_loads_without_waiting_words(worker, toy_models):
    request = worker.submit(LoadPair(str(toy_models.main), None, warm_up=False))
    assert [type(e) for e in events_of(worker, request, (PairLoaded, EngineError))] == [PairLoaded]
