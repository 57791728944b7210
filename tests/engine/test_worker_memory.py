"""The worker keeps what a pair's adaptive controller learnt across sessions, per pair."""

from __future__ import annotations

import queue

from app.engine.decoding.events import GenerationFinished
from app.engine.library.store import Store
from app.engine.policy.modes import SpeculationMode
from app.engine.protocol import Generate, LoadPair, PairLoaded, SpeculationSettings
from app.engine.worker import EngineWorker

ASK = Generate(
    ({"role": "user", "content": "Write a haiku"},),
    speculation=SpeculationSettings("adaptive"),
    max_tokens=16,
)


def _session(store: Store, main: str, draft: str) -> set[SpeculationMode]:
    """Load the pair, answer once; the modes whose controller started from a saved state."""
    inbox: queue.Queue = queue.Queue()
    worker = EngineWorker(inbox.put, memory=store)
    worker.start()
    try:
        worker.submit(LoadPair(main, draft))
        worker.submit(ASK)
        while not isinstance(event := inbox.get(timeout=120).event, GenerationFinished):
            assert not isinstance(event, PairLoaded) or event.speculation_refusal is None
        return set(worker.policies.restored)
    finally:
        assert worker.shutdown(timeout=30)


def test_the_next_session_of_a_pair_starts_from_what_the_last_one_learnt(toy_models, tmp_path):
    store = Store(tmp_path / "library.sqlite3")
    main, draft = str(toy_models.main), str(toy_models.draft)
    assert _session(store, main, draft) == set()  # never seen: starts from nothing
    assert _session(store, main, draft) == {SpeculationMode.ADAPTIVE}  # saved after the answer
    assert _session(store, main, str(toy_models.draft_random)) == set()  # another draft: its own
