"""The conversation model without Qt: what the controller does to it and what observers hear."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.engine.decoding.events import Provenance, TokenEvent
from app.engine.store.transcript import (
    AnswerStats,
    AnswerTurn,
    Change,
    LosslessVerdict,
    MessageState,
    Transcript,
    UserTurn,
    Verdict,
)


def heard(transcript: Transcript) -> list[tuple[Change, int | None]]:
    log: list[tuple[Change, int | None]] = []
    transcript.observers.append(lambda change, turn: log.append((change, None if turn is None else turn.key)))
    return log


def test_a_streamed_turn_tells_its_observers_each_step():
    t = Transcript()
    log = heard(t)
    t.append_user(1, "Why?")
    answer = t.start_answer(2)
    assert answer.live and answer.state is MessageState.PARTIAL
    for i, text in enumerate(["Be", "cause"]):
        answer.answer.add(TokenEvent(i, text, Provenance.DRAFT, 0.0, 0, i))
    t.extend_answer(answer, 2)
    t.extend_answer(answer, 2)  # nothing new settled: nothing to draw
    t.checkpoint(answer, MessageState.PARTIAL, AnswerStats(tokens=2))
    t.finish_answer(answer, MessageState.COMPLETE, AnswerStats(tokens=2, tokens_per_second=9.0))
    assert log == [
        (Change.APPENDED, 1),
        (Change.APPENDED, 2),
        (Change.EXTENDED, 2),
        (Change.STATS, 2),
        (Change.FINISHED, 2),
    ]
    assert not answer.live, "a finished answer is no longer live"
    assert answer.state == "complete", "a finished answer is complete"
    assert answer.stats.tokens_per_second == 9.0, "its final stats are kept"
    assert t.chat("Be brief.") == (
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "Because"},
    )
    assert t.chat(before=1) == ({"role": "user", "content": "Why?"},)


def conversation() -> Transcript:
    t = Transcript([UserTurn(1, "one"), AnswerTurn(2), UserTurn(3, "two"), AnswerTurn(4)])
    return t


def _regenerate(t: Transcript, key: int | None) -> int | None:
    """What the chat does to the transcript once the store has regenerated (`ChatLog`): the
    question's position, after everything past it is dropped; None when there is none."""
    question = t.question_before(key)
    if question is None:
        return None
    t.drop_after(question.key)
    return t.position(question.key)


def test_regenerate_drops_the_answer_and_everything_after_its_question():
    t = conversation()
    log = heard(t)
    assert _regenerate(t, 2) == 0, "regenerating the first answer keeps only the first question"
    assert [x.key for x in t] == [1], "everything after the question is dropped"
    assert log == [(Change.RESET, None)]
    t = conversation()
    assert _regenerate(t, None) == 2, "regenerating the last answer keeps everything before it"
    assert [x.key for x in t] == [1, 2, 3], "the earlier turns stay"
    assert _regenerate(Transcript([AnswerTurn(9)]), None) is None


def test_editing_a_question_replaces_it_and_drops_what_followed():
    t = conversation()
    assert t.edit(3, "two, again") == 2
    assert [x.text for x in t] == ["one", "", "two, again"]
    with pytest.raises(KeyError):
        t.edit(2, "answers are not edited")


def test_a_check_clears_the_old_verdict_and_records_the_new_one():
    t = conversation()
    answer = t.answer(4)
    assert answer is not None, "the answer is found by key"
    assert t.last_answer() is answer, "it is the last answer"
    assert t.last_question() == "two", "the last question is the one it answers"
    old = LosslessVerdict(Verdict.IDENTICAL, "Identical.", compared=3)
    t.record_verdict(answer, old)
    log = heard(t)
    t.start_check(answer)
    assert answer.checking, "a check in progress is shown"
    assert answer.stats.lossless is None, "the old verdict is cleared"
    found = LosslessVerdict(Verdict.WIDE_MARGIN, "Differs at 1.", position=1, compared=1)
    t.record_verdict(answer, found)
    assert not answer.checking, "the check is over"
    assert answer.stats.lossless == found, "the new verdict is recorded"
    assert found.measured, "the verdict counts as measured"
    assert not LosslessVerdict(Verdict.NOT_CHECKED, "sampled").measured
    assert log == [(Change.UPDATED, 4), (Change.UPDATED, 4)]


def test_stats_round_trip_through_json_and_tolerate_what_they_cannot_read():
    stats = AnswerStats(
        tokens=3,
        tokens_per_second=12.5,
        draft_rarely_right=(0, 300),
        token_ids=(1, 2, 3),
        lossless=LosslessVerdict(Verdict.NEAR_TIE, "Near tie.", 2, 2, 0.01, 0.01),
    )
    assert AnswerStats.from_json(stats.to_json()) == (stats, False)
    assert stats.to_json()["tok_s"] == 12.5, "the rate is saved"
    assert "speedup" not in stats.to_json(), "a missing speedup is left out"
    assert AnswerStats.from_json({"tokens": 2, "from_a_later_version": 1}) == (AnswerStats(tokens=2), False)
    assert AnswerStats.from_json({"tokens": 2, "slow_rounds": 3}) == (AnswerStats(tokens=2), False), (
        "an answer stored with a count since retired loads, undamaged"
    )
    assert AnswerStats.from_json({"tokens": True, "k": 2.5}) == (AnswerStats(), True)
    assert AnswerStats.from_json([1, 2]) == (AnswerStats(), True)
    assert replace(stats, lossless=None).to_json().get("lossless") is None
