"""The worker with a main split over 2 local ranks answers as with the pair loaded here."""

from __future__ import annotations

import queue

import mlx.core as mx

from app.engine.decoding.events import EngineError, GenerationFinished, RoundEvent
from app.engine.library.store import Store
from app.engine.policy.adaptive import AdaptiveDraftLength
from app.engine.policy.modes import SpeculationMode, state_key
from app.engine.protocol import Generate, LoadPair, PairLoaded, SpeculationSettings
from app.engine.worker import EngineWorker
from tests.engine.distributed.oversized import write_oversized_main
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


def test_a_split_main_answers_through_the_worker_and_keeps_what_its_controller_learnt(
    toy_models, tmp_path
) -> None:
    """The split answers as one process does. Rank 0 runs the controller, so what it learnt
    must travel: it starts from the state the store holds for the split pair, and its state
    after the answer is saved there, apart from the pair in one process (a split's costs are
    not one machine's)."""
    store = Store(tmp_path / "library.sqlite3")
    main, draft = str(toy_models.main), str(toy_models.draft)
    key = state_key(main, draft, "split over 2 ranks", SpeculationMode.ADAPTIVE)
    seen_before = AdaptiveDraftLength().export_state()
    seen_before["counts"] = [0, 0, 1000]  # a thousand rounds drafted in earlier sessions
    store.put("controller", key, seen_before)
    inbox: queue.Queue = queue.Queue()
    worker = EngineWorker(inbox.put, memory=store)
    worker.start()
    try:
        split, split_rounds = _answer(worker, inbox, LoadPair(main, draft, ranks=2))
        ask = Generate(
            ({"role": "user", "content": "Hello"},),
            speculation=SpeculationSettings("adaptive"),
            max_tokens=20,
        )
        adaptive = _collect(inbox, worker.submit(ask), _is_final, timeout=300)
        here, here_rounds = _answer(worker, inbox, LoadPair(main, draft))
    finally:
        assert worker.shutdown(timeout=60)
    assert split.token_ids == here.token_ids, "two ranks give the tokens of one process"
    assert split.text == here.text, "two ranks give the text of one process"
    # rank 0 decodes the refused drafts, as the worker does for a pair loaded here
    assert [r.refused_text for r in split_rounds] == [r.refused_text for r in here_rounds]
    assert any(r.refused_text for r in split_rounds)

    assert isinstance(adaptive[-1], GenerationFinished), adaptive[-1]
    drafted = sum(1 for e in adaptive if isinstance(e, RoundEvent) and e.k)
    assert drafted, "the split's adaptive answer drafted"
    learnt = store.get("controller", key)
    assert learnt["counts"][2] == 1000 + drafted, "rank 0 went on from the saved state, and it was saved"
    here_key = state_key(main, draft, str(mx.default_device()), SpeculationMode.ADAPTIVE)
    assert store.get("controller", here_key) is None, "the pair in one process keeps its own state"


def _refusal(load: LoadPair):
    inbox: queue.Queue = queue.Queue()
    worker = EngineWorker(inbox.put)
    worker.start()
    try:
        [event] = _collect(inbox, worker.submit(load), _is_final, timeout=120)
    finally:
        assert worker.shutdown(timeout=60)
    assert isinstance(event, EngineError) and event.kind == "load", event
    return event


def test_the_window_load_refuses_a_permuted_draft_before_any_rank(
    toy_models, toy_mismatched_draft, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    started = []
    monkeypatch.setattr("app.engine.worker.ShardedPair", lambda *a, **k: started.append(a))
    event = _refusal(LoadPair(str(toy_models.main), str(toy_mismatched_draft), ranks=2))
    assert "token 300 differs" in event.message, "a mismatched draft is refused with the token that differs"
    assert started == [], "no rank is started"
    assert event.plain == "the draft model can't guess ahead for this main model (different vocabulary)"


def test_the_window_load_refuses_a_main_too_large_for_the_machines(toy_models, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    started = []
    monkeypatch.setattr("app.engine.worker.ShardedPair", lambda *a, **k: started.append(a))
    big = write_oversized_main(toy_models.main, tmp_path / "big")
    event = _refusal(LoadPair(str(big), str(toy_models.draft), ranks=2))
    assert "big split over 2 ranks needs" in event.message, (
        "a main too big for the ranks is refused with what it needs"
    )
    assert started == [], "no rank is started"
    assert event.plain == "the main model does not fit in this computer's memory, even split"
    hosts = tmp_path / "hosts.json"
    hosts.write_text('[{"ssh": "-oProxyCommand=id", "ips": ["10.0.0.1"]}]')
    event = _refusal(LoadPair(str(toy_models.main), hostfile=str(hosts)))
    assert "starts with '-'" in event.message, "a host name starting with '-' is refused"
    assert started == [], "no rank is started"
