"""The worker with a main split over 2 local ranks answers as with the pair loaded here."""

from __future__ import annotations

import queue

from app.engine.decoding.events import GenerationFinished, RoundEvent
from app.engine.protocol import Generate, LoadPair, PairLoaded, SpeculationSettings
from app.engine.worker import EngineWorker
from tests.engine.test_worker import _collect, _is_final


def _answer(worker: EngineWorker, inbox: queue.Queue, load: LoadPair) -> tuple[GenerationFinished, list]:
    [loaded] = _collect(inbox, worker.submit(load), _is_final, timeout=300)
    assert isinstance(loaded, PairLoaded), loaded
    ask = Generate(
        ({"role": "user", "content": "Hello"},),
        speculation=SpeculationSettings("fixed", 3),
        max_tokens=40,
    )
    events = _collect(inbox, worker.submit(ask), _is_final, timeout=300)
    assert isinstance(events[-1], GenerationFinished), events[-1]
    return events[-1], [e for e in events if isinstance(e, RoundEvent)]


def test_a_split_main_answers_through_the_worker(toy_models) -> None:
    inbox: queue.Queue = queue.Queue()
    worker = EngineWorker(inbox.put)
    worker.start()
    try:
        split, split_rounds = _answer(
            worker, inbox, LoadPair(str(toy_models.main), str(toy_models.draft), ranks=2)
        )
        here, here_rounds = _answer(worker, inbox, LoadPair(str(toy_models.main), str(toy_models.draft)))
    finally:
        assert worker.shutdown(timeout=60)
    assert split.token_ids == here.token_ids and split.text == here.text
    # rank 0 decodes the refused drafts, as the worker does for a pair loaded here
    assert [r.refused_text for r in split_rounds] == [r.refused_text for r in here_rounds]
    assert any(r.refused_text for r in split_rounds)
