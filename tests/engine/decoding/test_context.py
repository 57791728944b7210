"""The context gate: refused before prefill with the numbers, the oldest turns dropped when
asked, and a draft with a shorter context than the main's that stops drafting instead of
reading past it."""

from __future__ import annotations

import queue
from dataclasses import replace

import pytest

from app.engine.api import ContextTooLong, LoadedPair
from app.engine.decoding.context import answer_room, context_length, fit_conversation
from app.engine.decoding.loading import LoadedModel, ModelPair
from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.decoding.session import ChatSession
from app.engine.decoding.templates.chat import format_chat
from app.engine.features.prompts import BenchPrompt
from app.engine.measure.bench import run_benchmark
from app.engine.protocol import (
    ContextOverflow,
    EngineError,
    Generate,
    GenerationContext,
    GenerationFinished,
    LoadPair,
    PairLoaded,
    PrefillProgress,
)
from app.engine.worker import EngineWorker
from tests.engine.helpers import ForwardSpy, copy_with_context, drive

LONG = "a long message that goes on " * 8


def _spied(model: LoadedModel, positions: int) -> LoadedModel:
    return replace(
        model, model=ForwardSpy(model.model), config={**model.config, "max_position_embeddings": positions}
    )


# -- the rules -----------------------------------------------------------------------------------


def test_context_length_is_read_from_the_config_or_its_text_part():
    assert context_length({"max_position_embeddings": 4096}) == 4096
    assert context_length({"text_config": {"max_position_embeddings": 8192}}) == 8192
    assert context_length({"hidden_size": 64}) is None


def test_answer_room_refuses_with_both_numbers_and_caps_the_answer_at_the_context():
    with pytest.raises(ContextTooLong) as refused:
        answer_room(40_312, 512, 32_768, "Shorten it.")
    assert (
        str(refused.value)
        == "This conversation is 40,312 tokens; the main model reads at most 32,768. Shorten it."
    )
    assert isinstance(refused.value, ValueError)
    assert answer_room(32_000, 1024, 32_768) == 768  # the answer stops where the context ends
    assert answer_room(100, 1024, None) == 1024


def _turns(n: int) -> list[dict[str, str]]:
    chat = [{"role": "system", "content": "s" * 5}]
    for i in range(n):
        chat += [{"role": "user", "content": f"q{i}" * 10}, {"role": "assistant", "content": f"a{i}" * 10}]
    return chat + [{"role": "user", "content": "latest" * 5}]


def _count(messages) -> list[int]:
    return [0] * sum(len(m["content"]) for m in messages)


def test_drop_oldest_keeps_the_system_prompt_and_the_latest_message_and_drops_the_fewest_turns():
    chat = _turns(6)  # system 5 + 6 exchanges of 40-60 characters + latest 30
    whole = len(_count(chat))
    with pytest.raises(ContextTooLong):
        fit_conversation(chat, _count, whole, 64, drop_oldest=False)
    fitted = fit_conversation(chat, _count, whole + 64 - 1, 64, drop_oldest=True)
    assert fitted.dropped == 2, "the two oldest turns are dropped"
    assert fitted.note == "dropped 2 oldest turns to fit the model's context", "the note says so in words"
    kept = fit_conversation(chat, _count, 200, 64, drop_oldest=True)
    survivors = chat[:1] + chat[1 + kept.dropped :]
    assert len(kept.ids) == len(_count(survivors)), "the prompt is the surviving turns"
    assert survivors[1]["role"] == "user", "the conversation after the system prompt starts with the user"
    assert len(kept.ids) + 64 <= 200 < len(_count(chat[:1] + chat[kept.dropped - 1 :])) + 64


def test_drop_oldest_refuses_when_the_latest_message_alone_does_not_fit():
    with pytest.raises(
        ContextTooLong, match=r"^The latest message with the system prompt is 35 tokens; .* at most 40"
    ):
        fit_conversation(_turns(3), _count, 40, 64, drop_oldest=True)
    with pytest.raises(ContextTooLong, match=r"^The latest message alone is 30 tokens; .* at most 40"):
        fit_conversation(_turns(3)[1:], _count, 40, 64, drop_oldest=True)


# -- before prefill ------------------------------------------------------------------------------


def test_the_api_refuses_a_prompt_past_the_main_context_before_any_forward_pass(toy_pair):
    main = _spied(toy_pair.main, 32)
    pair = LoadedPair(ModelPair(main, None))
    with pytest.raises(
        ContextTooLong, match=r"This conversation is \d+ tokens; the main model reads at most 32\."
    ):
        pair.stream(LONG, mode="plain", max_tokens=8)
    assert main.model.passes == []


def test_the_answer_stops_where_the_main_context_ends(toy_pair):
    prompt = format_chat(toy_pair.tokenizer, [{"role": "user", "content": "Hi"}])
    main = _spied(toy_pair.main, len(prompt) + 64)
    stream = LoadedPair(ModelPair(main, None)).stream("Hi", mode="plain", max_tokens=500)
    list(stream)
    assert stream.answer.stats.tokens <= 64
    assert all(offset + fed <= len(prompt) + 64 for offset, fed in main.model.passes)


def test_bench_refuses_a_prompt_past_the_main_context(toy_pair):
    pair = ModelPair(_spied(toy_pair.main, 32), None)
    with pytest.raises(ContextTooLong, match="reads at most 32"):
        list(run_benchmark(pair, [BenchPrompt("long", "prose", LONG)], modes=("plain",), max_tokens=8))
    assert pair.main.model.passes == []


@pytest.fixture
def short_worker(toy_models, tmp_path):
    """A worker with a main that reads at most 64 tokens loaded."""
    inbox: queue.Queue = queue.Queue()
    worker = EngineWorker(inbox.put)
    worker.start()
    main = copy_with_context(toy_models.main, tmp_path / "main", 64)
    loaded = worker.submit(LoadPair(str(main)))
    while not isinstance((message := inbox.get(timeout=120)).event, PairLoaded):
        assert message.request == loaded and not isinstance(message.event, EngineError), message
    worker.inbox = inbox  # type: ignore[attr-defined]
    yield worker
    assert worker.shutdown(timeout=30)


def _answer(worker, command) -> list:
    request = worker.submit(command)
    events = []
    while True:
        message = worker.inbox.get(timeout=120)
        if message.request == request:
            events.append(message.event)
            if isinstance(message.event, GenerationFinished) or (
                isinstance(message.event, EngineError) and message.event.kind != "notice"
            ):
                return events


def test_the_worker_refuses_before_prefill(short_worker, monkeypatch):
    prefills = []
    real = ChatSession.prefill
    monkeypatch.setattr(
        ChatSession, "prefill", lambda self, *a, **kw: prefills.append(1) or real(self, *a, **kw)
    )
    events = _answer(short_worker, Generate(({"role": "user", "content": LONG},), max_tokens=8))
    [refusal] = events
    assert refusal.kind == "context"
    assert "the main model reads at most 64. Start a new conversation" in refusal.message
    assert "drop the oldest turns (Settings)" in refusal.message
    assert prefills == []


def test_the_worker_drops_the_oldest_turns_when_asked(short_worker):
    chat = (
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first question " * 3},
        {"role": "assistant", "content": "first answer " * 3},
        {"role": "user", "content": "Hi"},
    )
    [refusal] = _answer(short_worker, Generate(chat, max_tokens=8))
    assert refusal.kind == "context"
    events = _answer(short_worker, Generate(chat, max_tokens=8, overflow=ContextOverflow.DROP_OLDEST))
    notice = next(e for e in events if isinstance(e, EngineError))
    assert notice.kind == "notice", "dropping turns is a notice, not an error"
    assert notice.message == "dropped 2 oldest turns to fit the model's context", (
        "the notice says how many turns were dropped"
    )
    [context] = [e for e in events if isinstance(e, GenerationContext)]
    assert context.prompt_tokens + 8 <= 64
    assert (
        isinstance(events[-1], GenerationFinished) and events[-1].stats.prompt_tokens == context.prompt_tokens
    )
    assert any(isinstance(e, PrefillProgress) for e in events)


def test_overflow_is_refused_for_an_unknown_value():
    with pytest.raises(ValueError):
        Generate(({"role": "user", "content": "hi"},), overflow="truncate")  # type: ignore[arg-type]


# -- a draft with a shorter context --------------------------------------------------------------


def test_a_draft_with_a_shorter_context_stops_drafting_and_the_answer_completes(toy_pair, toy_prompt):
    limit = len(toy_prompt) + 12
    draft = _spied(toy_pair.draft, limit)
    plain = drive(ChatSession(toy_pair), toy_prompt, PlainDecoding(), max_tokens=40)
    out = drive(ChatSession(ModelPair(toy_pair.main, draft)), toy_prompt, FixedDraftLength(4), max_tokens=40)
    assert out.finished is not None and out.finished.token_ids == plain.finished.token_ids
    assert len(out.ids) == 40, "all 40 tokens are given"
    assert out.offsets_ok, "every round left the caches in step with the tokens"
    assert any(r.k > 0 for r in out.rounds)  # it drafted while there was room
    assert draft.model.passes and all(offset + fed <= limit for offset, fed in draft.model.passes)
    stopped = [r for r in out.rounds if r.decision.draft_stopped]
    assert stopped and all(r.k == 0 for r in stopped)
    assert stopped[0].decision.draft_stopped == (
        f"drafting stopped at {limit:,} tokens, the draft model's context; the rest of the answer is plain decoding"
    )


def test_a_prompt_past_the_draft_context_is_never_read_by_the_draft(toy_pair, toy_prompt):
    draft = _spied(toy_pair.draft, len(toy_prompt) - 4)
    pair = LoadedPair(ModelPair(toy_pair.main, draft))
    stream = pair.stream(toy_pair.tokenizer.decode(toy_prompt), mode="fixed", k=3, max_tokens=12)
    list(stream)
    assert stream.answer.stats.tokens == 12, "the answer runs to its 12 tokens"
    assert stream.answer.stats.proposed == 0, "no draft is proposed where the context has no room"
    assert draft.model.passes == []
    assert any(n.message.startswith("drafting stopped at") for n in stream.answer.notices)
