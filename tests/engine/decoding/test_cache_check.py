"""A cache layer that trims one entry short is caught right after the trim: the session rebuilds
or sets the cache aside, says why, and the answer stays the main model's own."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.decoding.session import ChatSession
from tests.engine.helpers import drive

MISMATCH = "did not match the conversation after a trim"


def _trims_short(layer: Any) -> None:
    """Make `layer` keep one entry more than each trim asks it to drop (a faulty cache class)."""
    real = layer.trim
    layer.trim = lambda n: real(n - 1) if n > 0 else real(n)


def _faulty(pair, role: str) -> ChatSession:
    """A session whose main's or draft's last layer trims short."""
    session = ChatSession(pair)
    cache = session.main_cache if role == "main" else session.draft_cache
    assert cache is not None
    _trims_short(cache[-1])
    return session


@pytest.mark.parametrize("role", ["main", "draft"])
def test_a_layer_that_trims_short_is_caught_and_the_answer_is_the_mains(toy_useless_pair, toy_prompt, role):
    # an unrelated draft: its proposals are refused, so every round trims both caches
    pair = toy_useless_pair
    plain = drive(ChatSession(pair), toy_prompt, PlainDecoding(), max_tokens=40, stop_ids=[])
    session = _faulty(pair, role)
    out = drive(session, toy_prompt, FixedDraftLength(3), max_tokens=40, stop_ids=[])
    assert out.ids == plain.ids, "the answer is plain decoding's own"
    assert out.offsets_ok, "every round left the caches in step with the tokens"
    [notice] = [n for n in out.notices if MISMATCH in n.message]
    assert notice.kind == "notice", "the check's finding is a notice, not an error"
    assert f"the {role} model's cache" in notice.message, "the notice names the model whose cache is wrong"
    assert "layer " in notice.message and "generating plainly" in notice.message
    assert session.speculation_refusal == notice.message, "the session's refusal is the notice's words"
    assert not session.can_speculate, "the session no longer speculates"
    # the rounds after the one that tripped the check propose nothing
    tripped = next(i for i, r in enumerate(out.rounds) if r.accepted < r.k)
    assert tripped < len(out.rounds) - 1, "the check tripped before the last round"
    assert all(r.k == 0 for r in out.rounds[tripped + 1 :]), "no round after it drafts"
    # and the session answers on as a fresh one does
    again = drive(session, toy_prompt, FixedDraftLength(3), max_tokens=24, stop_ids=[])
    assert again.ids == plain.ids[:24], "the next answer is plain decoding's own"
    assert again.offsets_ok, "the next answer keeps the caches in step"


def test_without_the_check_the_short_layer_changes_the_answer(toy_useless_pair, toy_prompt, monkeypatch):
    """The fault is real: left unchecked it changes what the main says."""
    monkeypatch.setattr(ChatSession, "check_caches", lambda self: None)
    pair = toy_useless_pair
    plain = drive(ChatSession(pair), toy_prompt, PlainDecoding(), max_tokens=40, stop_ids=[])
    out = drive(_faulty(pair, "main"), toy_prompt, FixedDraftLength(3), max_tokens=40, stop_ids=[])
    assert not out.offsets_ok, "the faulty cache is caught"
    assert out.ids != plain.ids, "the faulty cache changes the answer"


def test_a_queued_step_taken_back_short_is_caught_before_the_next_answer(toy_pair, toy_prompt):
    """A plain answer that stops under a queued step trims that step back out of the main."""
    fresh = drive(ChatSession(toy_pair), toy_prompt, PlainDecoding(), max_tokens=24, stop_ids=[])
    stop = fresh.ids[5]
    session = _faulty(toy_pair, "main")
    first = drive(session, toy_prompt, PlainDecoding(), max_tokens=24, stop_ids=[stop])
    assert first.finished is not None and first.finished.reason == "stop"
    assert any(MISMATCH in n.message for n in first.notices), "the mismatch is reported"
    assert first.offsets_ok, "the answer still kept the caches in step"
    after = drive(session, toy_prompt, PlainDecoding(), max_tokens=24, stop_ids=[])
    assert after.ids == fresh.ids, "the answer after the notice is a fresh session's"
    assert after.offsets_ok, "it keeps the caches in step"
