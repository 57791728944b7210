"""The losslessness check and the arena as worker commands, through the real worker thread."""

from __future__ import annotations

import queue

import mlx.core as mx
import pytest

from app.engine.decoding.templates.chat import format_chat
from app.engine.features.arena import LOOKUP, load_results
from app.engine.protocol import (
    ArenaFinished,
    ArenaProgress,
    BenchPrompt,
    CheckLossless,
    EngineError,
    Generate,
    GenerationFinished,
    LoadPair,
    LosslessReport,
    PairLoaded,
    RunArena,
    SpeculationSettings,
)
from app.engine.worker import EngineWorker
from tests.engine.helpers import next_token_logits

FINAL = (GenerationFinished, PairLoaded, LosslessReport, ArenaFinished)
HAIKU = ({"role": "user", "content": "Write a haiku"},)


@pytest.fixture
def worker(toy_models):
    inbox: queue.Queue = queue.Queue()
    w = EngineWorker(inbox.put)
    w.start()
    w.inbox = inbox  # type: ignore[attr-defined]
    yield w
    assert w.shutdown(timeout=30)


def run(worker, command, on_event=None) -> list:
    request = worker.submit(command)
    events = []
    while True:
        message = worker.inbox.get(timeout=120)
        if message.request != request:
            continue
        events.append(message.event)
        if on_event:
            on_event(message.event)
        if isinstance(message.event, FINAL) or (
            isinstance(message.event, EngineError) and message.event.kind != "notice"
        ):
            return events


def test_check_lossless_identical_and_tampered(worker, toy_models, toy_pair):
    [error] = run(worker, CheckLossless(HAIKU, (1, 2, 3)))
    assert isinstance(error, EngineError) and "no model is loaded" in error.message
    run(worker, LoadPair(str(toy_models.main), str(toy_models.draft)))
    done = run(worker, Generate(HAIKU, speculation=SpeculationSettings("fixed", 3), max_tokens=16))[-1]
    assert done.stats.accepted > 0
    answer = done.token_ids
    [report] = run(worker, CheckLossless(HAIKU, answer, done.stats.prompt_tokens))
    assert report.verdict == "identical" and report.compared == len(answer)

    prompt = format_chat(toy_pair.tokenizer, list(HAIKU))
    worst = int(mx.argmin(next_token_logits(toy_pair, prompt + list(answer[:4]))).item())
    tampered = answer[:4] + (worst,) + answer[5:]
    [report] = run(worker, CheckLossless(HAIKU, tampered))
    assert (report.verdict, report.position, report.plain_token) == ("wide-margin", 4, answer[4])
    # the two tokens come decoded, so the app shows them without a tokenizer of its own
    decode = toy_pair.tokenizer.decode
    assert (report.answer_text, report.plain_text) == (decode([worst]), decode([answer[4]]))
    assert f"The answer has {decode([worst])!r} where plain decoding has {decode([answer[4]])!r}." in (
        report.message
    )

    [changed] = run(worker, CheckLossless(HAIKU, answer, done.stats.prompt_tokens + 3))
    assert isinstance(changed, EngineError) and "changed since it was written" in changed.message
    [foreign] = run(worker, CheckLossless(HAIKU, (10**7,)))
    assert isinstance(foreign, EngineError) and "outside the loaded model's vocabulary" in foreign.message
    [empty] = run(worker, CheckLossless(HAIKU, ()))
    assert isinstance(empty, EngineError) and "no recorded tokens" in empty.message


def test_arena_ranks_persists_and_cancels(worker, toy_models, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    main = str(toy_models.main)
    prompts = (BenchPrompt("mine", "user", "def add(a, b):"),)
    candidates = (str(toy_models.draft_random), str(toy_models.draft), LOOKUP)
    events = run(worker, RunArena(main, candidates, prompts, k=3, max_tokens=10))
    progress = [e for e in events if isinstance(e, ArenaProgress)]
    done = events[-1]
    assert isinstance(done, ArenaFinished) and not done.cancelled, "the arena finishes without a cancel"
    assert done.saved, "and saves its results"
    assert progress[-1].done == progress[-1].total == 4
    ranks = [r.candidate for r in done.results]
    assert ranks.index(str(toy_models.draft)) < ranks.index(str(toy_models.draft_random))
    by_name = {r.candidate: r for r in done.results}
    assert by_name[str(toy_models.draft)].acceptance > by_name[str(toy_models.draft_random)].acceptance
    assert load_results(main) == list(done.results)

    events = run(
        worker,
        RunArena(main, candidates, prompts * 3, k=3, max_tokens=10),
        on_event=lambda e: isinstance(e, ArenaProgress) and e.done == 1 and worker.cancel(),
    )
    assert events[-1].cancelled, "a cancelled arena says so"
    assert events[-1].saved is None, "a cancelled arena saves nothing"
    assert load_results(main) == list(done.results)  # a cancelled arena keeps the last full one

    [bad] = run(worker, RunArena(str(tmp_path / "nope"), candidates))
    assert isinstance(bad, EngineError) and bad.kind == "load"
    [none] = run(worker, RunArena(main, ()))
    assert isinstance(none, EngineError) and "no candidates" in none.message
