"""Compiled passes in a session: the same answers as eager passes, turn after turn, and never over
caches that do not pad keys."""

from __future__ import annotations

from collections import Counter

import mlx.core as mx
import pytest

from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.decoding.session import ChatSession
from app.engine.decoding.shapes.compiled_step import CompiledStep, StepChoice
from tests.engine.helpers import drive


def _turns(session: ChatSession, pair, prompt: list[int], policy_factory) -> list[list[int]]:
    """Three turns with the second edited and answered again: the answers, in order."""
    tok = pair.tokenizer
    eos = sorted(tok.eos_token_ids)[0]
    answers = []

    def turn(text: list[int]) -> list[int]:
        out = drive(session, text, policy_factory(), max_tokens=14, stop_ids=[])
        assert out.offsets_ok, "every round left the caches in step with the tokens"
        assert not out.notices, "no notice"
        answers.append(out.ids)
        return out.ids

    first = turn(prompt)
    second = prompt + first + [eos] + tok.encode(" and now in Rust please")
    turn(second)
    edited = prompt + first + [eos] + tok.encode(" in Go instead")  # trims back into the second turn
    third = edited + turn(edited) + [eos] + tok.encode(" shorter!")
    turn(third)
    return answers


@pytest.fixture(scope="module")
def eager_plain(toy_pair, toy_prompt) -> tuple[list[list[int]], ChatSession]:
    """The reference: plain decoding, eager passes; its answers and its session after them."""
    session = ChatSession(toy_pair, padded_keys=True, compiled_steps=False)
    return _turns(session, toy_pair, toy_prompt, PlainDecoding), session


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("policy", ["plain", "fixed k"])
def test_compiled_and_eager_passes_give_the_plain_answers_over_an_edited_conversation(
    toy_pair, toy_prompt, eager_plain, compiled, policy, monkeypatch
):
    if policy == "plain" and not compiled:
        pytest.skip("the reference itself")
    session = ChatSession(toy_pair, padded_keys=True, compiled_steps=compiled)
    assert (session.main_step is not None, session.draft_step is not None) == (compiled, compiled)
    ran: Counter[tuple[str, int]] = Counter()
    original = CompiledStep.__call__

    def counted(self, cache, ids):
        out = original(self, cache, ids)
        if out is not None:
            ran["main" if self is getattr(session.main_step, "step", None) else "draft", ids.shape[0]] += 1
        return out

    monkeypatch.setattr(CompiledStep, "__call__", counted)
    got = _turns(
        session, toy_pair, toy_prompt, PlainDecoding if policy == "plain" else lambda: FixedDraftLength(3)
    )
    want, reference = eager_plain
    assert got == want
    # the toy's answers lean on each token more than on its context: the main's cache, which
    # holds every key and value the conversation wrote, must match too
    assert session.tokens == reference.tokens
    n = len(session.tokens)
    for mine, theirs in zip(session.main_cache, reference.main_cache, strict=True):
        for a, b in ((mine.keys, theirs.keys), (mine.values, theirs.values)):
            assert mx.allclose(a[..., :n, :], b[..., :n, :], atol=1e-4, rtol=1e-4).item()
    assert len({tuple(a) for a in got}) == 4, "each turn should answer something of its own"
    if not compiled:
        assert not ran
    elif policy == "plain":
        assert ran["main", 1] >= 4 * 12, "the main's one-token steps ran compiled"
        assert not any(role == "draft" for role, _ in ran), "no draft pass ran compiled"
    else:
        assert ran["main", 4] and ran["draft", 1]  # verify passes (pending and three proposals), draft steps


def test_a_session_without_padded_caches_never_compiles(toy_pair, toy_prompt, monkeypatch):
    def refuse(self, cache, ids):
        raise AssertionError("a compiled pass over caches that do not pad keys")

    monkeypatch.setattr(CompiledStep, "__call__", refuse)
    session = ChatSession(toy_pair, padded_keys=False, compiled_steps=True)
    assert session.main_step is None and session.draft_step is None
    choices = session.step_choices
    assert choices.draft is not None
    assert (choices.main.compiled, choices.main.reason) == (False, "caches not padded")
    assert (choices.draft.compiled, choices.draft.reason) == (False, "caches not padded")
    reference = drive(ChatSession(toy_pair, padded_keys=False), toy_prompt, PlainDecoding(), max_tokens=12)
    assert drive(session, toy_prompt, FixedDraftLength(3), max_tokens=12).ids == reference.ids


def test_an_unmeasured_model_runs_eager_by_default(toy_pair, monkeypatch):
    from app.engine.decoding.shapes.compiled_step import compiled_step

    for model in (toy_pair.main.model, toy_pair.draft.model):
        monkeypatch.setattr(compiled_step(model), "timing", None)
    session = ChatSession(toy_pair, padded_keys=True)
    assert session.main_step is None, "no compiled step without a measurement"
    assert session.step_choices.main.reason == "not measured", "the choice says it was not measured"


def test_a_session_made_before_the_warm_up_follows_what_it_measured(toy_pair, monkeypatch):
    """The worker makes its session when the pair loads, then warms up: the measurement that
    comes after must still decide the session's passes."""
    from app.engine.decoding.shapes.compiled_step import ChosenStep, StepTiming, compiled_step

    step = compiled_step(toy_pair.main.model)
    monkeypatch.setattr(step, "timing", None)
    session = ChatSession(toy_pair, padded_keys=True)
    assert session.main_step is None
    faster = StepTiming((1,), (5.0,), (4.0,))
    monkeypatch.setattr(step, "timing", faster)
    assert session.main_step == ChosenStep(step, frozenset({1}))
    assert session.step_choices.main == StepChoice(True, "measured", faster, frozenset({1}))
    monkeypatch.setattr(step, "timing", StepTiming((1,), (4.0,), (5.0,)))
    assert session.main_step is None and not session.step_choices.main.compiled
