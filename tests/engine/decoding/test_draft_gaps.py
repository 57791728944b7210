"""A probe that reads only the last tokens a bypassed draft skipped: the draft's cache keeps a gap,
the output stays plain decoding's, and editing back into the gap rewinds the draft to its start."""

from __future__ import annotations

from app.engine.decoding.events import Decision, Reason
from app.engine.decoding.policy import DraftPlan, PlainDecoding, PolicyDefaults, RoundContext
from app.engine.decoding.session import ChatSession
from tests.engine.helpers import drive


class SkipThenProbe(PolicyDefaults):
    """Draft 3 at the start, sit out until `probe_at` tokens, then draft reading at most `read`."""

    def __init__(self, probe_at: int, read: int) -> None:
        self.probe_at, self.read = probe_at, read

    def choose(self, context: RoundContext) -> DraftPlan:
        if context.position == 0:
            return DraftPlan(3)
        return DraftPlan(2, read_limit=self.read) if context.position >= self.probe_at else DraftPlan(0)

    def decision(self) -> Decision:
        return Decision(Reason.FIXED, 2)


def test_a_probe_reads_only_the_last_skipped_tokens_and_the_answer_is_unchanged(toy_pair, toy_prompt):
    session = ChatSession(toy_pair)
    out = drive(session, toy_prompt, SkipThenProbe(probe_at=24, read=5), max_tokens=40, stop_ids=[])
    plain = drive(ChatSession(toy_pair), toy_prompt, PlainDecoding(), max_tokens=40, stop_ids=[])
    assert out.ids == plain.ids, "the answer is plain decoding's own"
    assert out.offsets_ok, "every round left the caches in step with the tokens"
    probe = next(r for r in out.rounds[1:] if r.k)
    assert probe.catch_up == 5  # read 5 of ~20 skipped
    ((start, end),) = session.draft_gaps
    assert end - start >= 15, "the draft skipped at least 15 tokens"
    assert session.draft_offset == session.draft_len - (end - start), (
        "the draft's offset accounts for the gap"
    )


def test_editing_back_into_a_gap_rewinds_the_draft_to_the_gap_start(toy_pair, toy_prompt):
    session = ChatSession(toy_pair)
    first = drive(session, toy_prompt, SkipThenProbe(probe_at=24, read=5), max_tokens=40, stop_ids=[])
    ((start, end),) = session.draft_gaps
    edited = (toy_prompt + first.ids)[: (start + end) // 2] + toy_pair.tokenizer.encode(" again")
    second = drive(session, edited, SkipThenProbe(probe_at=10, read=100), max_tokens=20, stop_ids=[])
    assert second.offsets_ok, "the next answer keeps the caches in step"
    assert not session.draft_gaps, "the next answer fills the gap"  # the re-read covers the edited text
    fresh = drive(ChatSession(toy_pair), edited, PlainDecoding(), max_tokens=20, stop_ids=[])
    assert second.ids == fresh.ids


def test_editing_back_after_a_gap_keeps_it(toy_pair, toy_prompt):
    session = ChatSession(toy_pair)
    first = drive(session, toy_prompt, SkipThenProbe(probe_at=24, read=5), max_tokens=40, stop_ids=[])
    gap = session.draft_gaps[0]
    edited = (toy_prompt + first.ids)[:-2] + toy_pair.tokenizer.encode(" more")
    session.truncate(len(edited) - 3)
    assert session.draft_gaps == [gap], "the gap before the edit is kept"
    assert session.cache_offsets()[1][0] == session.draft_offset, "the draft's cache ends at its offset"
    second = drive(session, edited, SkipThenProbe(probe_at=0, read=100), max_tokens=12, stop_ids=[])
    fresh = drive(ChatSession(toy_pair), edited, PlainDecoding(), max_tokens=12, stop_ids=[])
    assert second.offsets_ok, "the answer after the edit keeps the caches in step"
    assert second.ids == fresh.ids, "the answer after the edit is a fresh session's"
