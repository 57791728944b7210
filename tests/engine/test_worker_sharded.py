"""The worker with a main split over 2 local ranks answers as with the pair loaded here."""

from __future__ import annotations

import queue

from app.engine.decoding.events import EngineError, GenerationFinished, RoundEvent
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
    assert split.token_ids == here.token_ids, "two ranks give the tokens of one process"
    assert split.text == here.text, "two ranks give the text of one process"
    # rank 0 decodes the refused drafts, as the worker does for a pair loaded here
    assert [r.refused_text for r in split_rounds] == [r.refused_text for r in here_rounds]
    assert any(r.refused_text for r in split_rounds)


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
