"""The worker's protocol: every command is dispatched, old spellings still work, and replies
carry text already decoded (the UI has no tokenizer)."""

from __future__ import annotations

import json
import queue
from typing import get_args

import pytest

from app.engine.features.arena import LOOKUP
from app.engine.protocol import (
    AcceptanceRule,
    ArenaFinished,
    BaselineMeasured,
    BenchPrompt,
    CheckLossless,
    Command,
    EngineError,
    ErrorKind,
    FinishReason,
    Generate,
    GenerationFinished,
    LoadPair,
    LosslessReport,
    LosslessVerdict,
    MeasureBaseline,
    PairLoaded,
    ResetSession,
    RoundEvent,
    RunArena,
    SpeculationMode,
    SpeculationSettings,
    WorkerMessage,
)
from app.engine.worker import EngineWorker

HAIKU = ({"role": "user", "content": "Write a haiku"},)
FINAL = (GenerationFinished, PairLoaded, LosslessReport, ArenaFinished, BaselineMeasured)


@pytest.fixture
def worker(toy_models):
    inbox: queue.Queue[WorkerMessage] = queue.Queue()
    w = EngineWorker(inbox.put)
    w.start()
    w.inbox = inbox  # type: ignore[attr-defined]
    w.seen = []  # type: ignore[attr-defined]  # every message read, whichever request it answers
    yield w
    assert w.shutdown(timeout=30)


def run(worker, command) -> list:
    """The replies to `command`, up to its final one."""
    request = worker.submit(command)
    events = []
    while True:
        message = worker.inbox.get(timeout=120)
        worker.seen.append(message)
        if message.request != request:
            continue
        events.append(message.event)
        if isinstance(message.event, FINAL) or (
            isinstance(message.event, EngineError) and message.event.kind != ErrorKind.NOTICE
        ):
            return events


def test_settings_keep_their_stored_strings():
    """Settings files and stored answers hold these strings: the enums must read and print them."""
    settings = SpeculationSettings("lookup", 3, "residual")
    assert settings.mode is SpeculationMode.LOOKUP, "the mode is read as the app's lookup"
    assert settings.acceptance is AcceptanceRule.RESIDUAL, "the acceptance rule is read as residual"
    assert settings.mode == "lookup" and f"{settings.mode}" == "lookup"
    assert SpeculationSettings().mode == "adaptive", "the default mode is adaptive"
    assert SpeculationSettings().acceptance is None, "the default acceptance is left to the sampling"
    assert [m.value for m in SpeculationMode] == ["off", "fixed", "adaptive", "lookup"]
    assert [r.value for r in FinishReason] == ["stop", "length", "cancelled"]
    assert {k.value for k in ErrorKind} >= {"crash", "load", "state", "template", "notice"}
    assert json.dumps({"verdict": LosslessVerdict.NEAR_TIE}) == '{"verdict": "near-tie"}'
    with pytest.raises(ValueError):
        SpeculationSettings("sometimes")


def test_the_worker_answers_every_command_it_accepted_before(worker, toy_models, tmp_path, monkeypatch):
    """One of each command, spelt as callers wrote them before the enums (plain strings): each
    gets its usual reply, and none is reported as a crash."""
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    main = str(toy_models.main)
    load = LoadPair(main, str(toy_models.draft))
    asks = [
        Generate(HAIKU, speculation=SpeculationSettings(mode, 2, rule), max_tokens=6)
        for mode in ("off", "fixed", "adaptive", "lookup")
        for rule in (None, "exact", "residual")
    ]
    check = CheckLossless(HAIKU, (1, 2, 3))
    arena = RunArena(main, (LOOKUP,), (BenchPrompt("mine", "user", "def add(a, b):"),), 2, 4, save=False)
    baseline = MeasureBaseline(64, tokens=8)
    commands: list[Command] = [load, *asks, ResetSession(), check, arena, baseline]
    assert {type(c) for c in commands} == set(get_args(Command))

    replies = run(worker, load)
    assert isinstance(replies[-1], PairLoaded) and replies[-1].speculation_refusal is None
    assert replies[-1].device == "cpu"  # the test machine runs MLX on its CPU
    for ask in asks:
        done = run(worker, ask)[-1]
        assert isinstance(done, GenerationFinished), (ask.speculation, done)
        assert done.reason in ("stop", "length"), "the answer ends normally"
        assert done.stats.tokens > 0, "the answer has tokens"

    # the same question again reuses the cached conversation; after a reset, nothing
    assert run(worker, asks[0])[-1].stats.reused_tokens > 0
    reset = worker.submit(ResetSession())
    after = run(worker, asks[0])
    assert after[-1].stats.reused_tokens == 0
    greedy = after[-1].token_ids

    [report] = run(worker, CheckLossless(HAIKU, greedy))
    assert isinstance(report, LosslessReport) and report.verdict == "identical"
    done = run(worker, arena)[-1]
    assert isinstance(done, ArenaFinished) and [r.candidate for r in done.results] == [LOOKUP]
    assert done.saved is None, "an arena run that is not saved says so"
    assert not done.cancelled, "an arena run that ran through is not cancelled"
    measured = run(worker, baseline)[-1]
    assert isinstance(measured, BaselineMeasured) and measured.main == main, (
        "the plain baseline is measured for the loaded main"
    )
    assert measured.tokens == 8, "the baseline reads its 8 tokens"
    assert not [m for m in worker.seen if m.request == reset]  # a reset has no reply
    assert not [m for m in worker.seen if isinstance(m.event, EngineError)]


def test_a_round_carries_its_refused_drafts_as_text(worker, toy_models, toy_useless_pair):
    """A draft with random weights is refused almost every round: the round says what it
    proposed in words, decoded by the main's tokenizer, and nothing when nothing was refused."""
    run(worker, LoadPair(str(toy_models.main), str(toy_models.draft_random)))
    events = run(worker, Generate(HAIKU, speculation=SpeculationSettings("fixed", 3), max_tokens=24))
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    decode = toy_useless_pair.tokenizer.decode
    refused = [r for r in rounds if r.accepted < len(r.proposed)]
    assert refused and any(r.refused_text for r in refused)
    for r in rounds:
        expected = decode(list(r.proposed[r.accepted :])) if r.accepted < len(r.proposed) else ""
        assert r.refused_text == expected
