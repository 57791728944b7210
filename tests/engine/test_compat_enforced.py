"""Every path that loads a pair runs the picker's compatibility check: the API, the worker and
the arena refuse a draft whose ids mean other text, with the check's reason, before loading it."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import pytest

from app.engine.api import ModelLoadError, load_pair
from app.engine.decoding.events import EngineError
from app.engine.features.arena import ArenaFinished, run_arena_job
from app.engine.features.prompts import BenchPrompt
from app.engine.protocol import LoadPair, PairLoaded
from app.engine.worker import EngineWorker

REASON = "token 300 differs"


@pytest.fixture(autouse=True)
def specchat_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Verdicts are cached in the library store: one per test."""
    home = tmp_path / "home"
    monkeypatch.setenv("SPECCHAT_HOME", str(home))
    return home


def test_load_pair_refuses_before_reading_any_weights(toy_models, toy_mismatched_draft, monkeypatch):
    def no_weights(*args, **kwargs):
        raise AssertionError("weights were read before the check")

    monkeypatch.setattr("app.engine.decoding.loading.mlx_load", no_weights)
    with pytest.raises(ModelLoadError, match=REASON) as refused:
        load_pair(toy_models.main, toy_mismatched_draft)
    assert str(toy_mismatched_draft) in str(refused.value)
    from app.engine.api import IncompatiblePair  # the verdict rides on the error

    assert isinstance(refused.value, IncompatiblePair)
    assert [r.code for r in refused.value.verdict.refusals] == ["token_text"]


def test_force_loads_the_draft_anyway_and_the_main_still_decides(toy_models, toy_mismatched_draft):
    forced = load_pair(toy_models.main, toy_mismatched_draft, force=True)
    plain = load_pair(toy_models.main)
    spoken = forced.stream("Hello", mode="fixed", k=3, max_tokens=12)
    list(spoken)
    said = plain.stream("Hello", mode="plain", max_tokens=12)
    list(said)
    assert spoken.answer.token_ids == said.answer.token_ids


def test_a_compatible_pair_still_loads(toy_models):
    assert load_pair(toy_models.main, toy_models.draft).can_speculate


def test_the_worker_answers_an_incompatible_pair_with_a_load_error(toy_models, toy_mismatched_draft):
    inbox: queue.Queue = queue.Queue()
    worker = EngineWorker(inbox.put)
    worker.start()
    try:
        request = worker.submit(LoadPair(str(toy_models.main), str(toy_mismatched_draft)))
        while (message := inbox.get(timeout=120)).request != request:
            pass
    finally:
        assert worker.shutdown(timeout=30)
    event = message.event
    assert not isinstance(event, PairLoaded)
    assert isinstance(event, EngineError) and event.kind == "load", (
        "a mismatched pair is refused as a load error"
    )
    assert REASON in event.message, "the error gives the reason"
    # the window's headline, in plain words; the token detail stays in the message for Details
    assert event.plain == "the draft model can't guess ahead for this main model (different vocabulary)"


def test_the_arena_refuses_an_incompatible_candidate_with_its_reason(
    toy_pair, toy_models, toy_mismatched_draft
):
    out: list[object] = []
    run_arena_job(
        toy_pair,
        str(toy_models.main),
        (str(toy_mismatched_draft),),
        (BenchPrompt("mine", "user", "def add(a, b):"),),
        k=2,
        max_tokens=4,
        save=False,
        cancel=threading.Event(),
        emit=out.append,
    )
    done = out[-1]
    assert isinstance(done, ArenaFinished)
    [result] = done.results
    assert result.error is not None and REASON in result.error, "the arena run fails with the reason"
    assert result.speedup == 0.0, "a refused candidate has no speedup"
