"""The decode loop: speculation must change speed, never the output."""

from __future__ import annotations

import pytest

from app.engine.decoding.events import Provenance
from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.session import ChatSession
from tests.engine.helpers import drive

PENALTY = SamplingParams(repetition_penalty=5.0, repetition_context=64)


@pytest.fixture(scope="module")
def plain_reference(toy_pair, toy_prompt):
    out = {}
    for name, sampling in (("greedy", SamplingParams()), ("penalty", PENALTY)):
        out[name] = drive(
            ChatSession(toy_pair), toy_prompt, PlainDecoding(), max_tokens=48, sampling=sampling
        ).ids
    return out


@pytest.mark.parametrize("k", range(1, 9))
@pytest.mark.parametrize("sampling_name", ["greedy", "penalty"])
def test_greedy_speculation_equals_plain_for_every_k(toy_pair, toy_prompt, plain_reference, k, sampling_name):
    sampling = PENALTY if sampling_name == "penalty" else SamplingParams()
    out = drive(ChatSession(toy_pair), toy_prompt, FixedDraftLength(k), max_tokens=48, sampling=sampling)
    assert out.ids == plain_reference[sampling_name]
    assert out.offsets_ok
    assert any(r.accepted for r in out.rounds), "the toy draft should get some tokens accepted"


def test_plain_reference_is_not_degenerate(plain_reference):
    assert len(plain_reference["greedy"]) == 48
    assert plain_reference["greedy"] != plain_reference["penalty"], "the penalty must change the output"


def test_telemetry_adds_up(toy_pair, toy_prompt):
    out = drive(ChatSession(toy_pair), toy_prompt, FixedDraftLength(3), max_tokens=40, stop_ids=[])
    drafted = [t for t in out.tokens if t.provenance is Provenance.DRAFT]
    produced = [t for t in out.tokens if t.provenance is Provenance.MAIN]
    assert len(drafted) == sum(r.accepted for r in out.rounds)
    assert len(drafted) + len(produced) == len(out.tokens) == sum(len(r.emitted) for r in out.rounds)
    for r in out.rounds:
        assert len(r.proposed) == r.k
        assert r.emitted[: r.accepted] == r.proposed[: r.accepted]
        assert r.draft_seconds >= 0 and r.verify_seconds > 0
    stats = out.finished.stats
    assert stats.proposed == sum(r.k for r in out.rounds)
    assert stats.acceptance == pytest.approx(stats.accepted / stats.proposed)
    assert stats.tokens == 40, "40 tokens counted"
    assert out.finished.reason == "length", "the answer ends at its length"
    # each token's round and position are what the rounds say
    assert [t.index for t in out.tokens] == list(range(40))
    assert [t.round for t in out.tokens] == [r.index for r in out.rounds for _ in r.emitted]


def test_text_segments_concatenate_to_the_decoded_answer(toy_pair, toy_prompt):
    out = drive(ChatSession(toy_pair), toy_prompt, FixedDraftLength(4), max_tokens=40)
    text = "".join(t.text for t in out.tokens) + out.finished.tail
    assert text == out.finished.text == toy_pair.tokenizer.decode(out.ids)


def _conversation(first: list[int], answer: list[int], eos: int, user: list[int]) -> list[int]:
    return first + answer + [eos] + user


def test_multi_turn_sessions_match_plain_and_reuse_caches(toy_pair, toy_prompt):
    tok = toy_pair.tokenizer
    eos = tok.eos_token_ids and sorted(tok.eos_token_ids)[0]
    follow_ups = [tok.encode(" and now in Rust please"), tok.encode(" shorter!")]
    transcripts = {}
    for name, policy in (("plain", PlainDecoding()), ("spec", FixedDraftLength(4))):
        session = ChatSession(toy_pair)
        prompt, answers, reused = toy_prompt, [], []
        for turn in range(3):
            out = drive(session, prompt, policy, max_tokens=24, stop_ids=[])
            assert out.offsets_ok
            answers.append(out.ids)
            reused.append(out.finished.stats.reused_tokens)
            if turn < 2:
                prompt = _conversation(prompt, out.ids, eos, follow_ups[turn])
        transcripts[name] = (answers, reused)
    assert transcripts["spec"][0] == transcripts["plain"][0]
    reused = transcripts["spec"][1]
    assert reused[0] == 0, "the first answer reuses nothing"
    assert reused[1] > len(toy_prompt), "the second reuses the first's prompt"
    assert reused[2] > reused[1], "the third reuses more"


def test_edited_turn_trims_back_to_the_common_prefix(toy_pair, toy_prompt):
    tok = toy_pair.tokenizer
    session = ChatSession(toy_pair)
    first = drive(session, toy_prompt + tok.encode(" first version"), FixedDraftLength(3), max_tokens=16)
    edited = toy_prompt + tok.encode(" second version")
    out = drive(session, edited, FixedDraftLength(3), max_tokens=16)
    assert first.ids, "the first answer gives tokens"
    assert out.offsets_ok, "every round left the caches in step with the tokens"
    assert len(toy_prompt) - 1 <= out.finished.stats.reused_tokens < len(edited) - 1
    fresh = drive(ChatSession(toy_pair), edited, PlainDecoding(), max_tokens=16)
    assert out.ids == fresh.ids


def test_cancel_mid_answer_leaves_a_usable_session(toy_pair, toy_prompt):
    tok = toy_pair.tokenizer
    session = ChatSession(toy_pair)
    cut = drive(session, toy_prompt, FixedDraftLength(4), max_tokens=40, cancel_after=7)
    assert cut.finished.reason == "cancelled", "the answer ends as cancelled"
    assert 7 <= len(cut.ids) < 40, "it stops soon after the cancel, before its length"
    assert cut.offsets_ok, "every round left the caches in step with the tokens"
    assert session.tokens == toy_prompt + cut.ids[:-1], "the session holds the prompt and the tokens shown"
    follow = toy_prompt + cut.ids + tok.encode(" continue")
    after = drive(session, follow, FixedDraftLength(4), max_tokens=20)
    fresh = drive(ChatSession(toy_pair), follow, PlainDecoding(), max_tokens=20)
    assert after.ids == fresh.ids


def test_prefill_is_chunked_reports_progress_and_can_be_cancelled(toy_pair, toy_prompt):
    long_prompt = toy_prompt * 12
    session = ChatSession(toy_pair, prefill_chunk=16)
    out = drive(session, long_prompt, FixedDraftLength(2), max_tokens=4)
    totals = {p.total for p in out.progress}
    # told in the prompt's tokens, though the main and the draft both read them
    assert len(totals) == 1 and totals.pop() == len(long_prompt) - 1
    assert [p.done for p in out.progress] == sorted(p.done for p in out.progress)
    assert out.progress[-1].done == out.progress[-1].total, "the prefill's progress reaches its total"
    assert len(out.progress) > 10, "progress is reported chunk by chunk"

    from threading import Event

    from app.engine.decoding.decode import generate

    cancel = Event()
    session = ChatSession(toy_pair, prefill_chunk=16)
    events = generate(session, long_prompt, policy=FixedDraftLength(2), max_tokens=4, cancel=cancel)
    seen = 0
    for event in events:
        seen += 1
        if seen == 3:
            cancel.set()
    assert event.reason == "cancelled", "a prefill cancelled ends as cancelled"
    assert event.token_ids == (), "with no tokens"
    main, _ = session.cache_offsets()
    assert 0 < len(session.tokens) < len(long_prompt) - 1, "the prefill stopped part of the way"
    assert all(o == len(session.tokens) for o in main), "the main's caches hold what was read"
    again = drive(session, long_prompt, FixedDraftLength(2), max_tokens=8)
    fresh = drive(ChatSession(toy_pair), long_prompt, PlainDecoding(), max_tokens=8)
    assert again.ids == fresh.ids, "the next answer is a fresh session's"
    assert again.offsets_ok, "every round left the caches in step with the tokens"


def test_stop_token_ends_the_answer_and_is_not_shown(toy_pair, toy_prompt):
    reference = drive(ChatSession(toy_pair), toy_prompt, PlainDecoding(), max_tokens=30, stop_ids=[]).ids
    stop = reference[12]
    first = reference.index(stop)
    for policy in (PlainDecoding(), FixedDraftLength(5)):
        session = ChatSession(toy_pair)
        out = drive(session, toy_prompt, policy, max_tokens=30, stop_ids=[stop])
        assert out.finished.reason == "stop"
        assert out.ids == reference[:first]
        assert out.offsets_ok, "every round left the caches in step with the tokens"
        assert session.pending == stop, "the stop token waits to be read with the next prompt"


def test_seeded_sampling_is_reproducible_and_top_k_1_is_greedy(toy_pair, toy_prompt, plain_reference):
    hot = SamplingParams(temperature=0.9, top_p=0.95, min_p=0.02, seed=7)
    a = drive(ChatSession(toy_pair), toy_prompt, PlainDecoding(), sampling=hot, max_tokens=30).ids
    b = drive(ChatSession(toy_pair), toy_prompt, PlainDecoding(), sampling=hot, max_tokens=30).ids
    c = drive(
        ChatSession(toy_pair),
        toy_prompt,
        PlainDecoding(),
        sampling=SamplingParams(temperature=0.9, seed=8),
        max_tokens=30,
    ).ids
    assert a == b and a != c
    spec = drive(ChatSession(toy_pair), toy_prompt, FixedDraftLength(3), sampling=hot, max_tokens=30)
    assert len(spec.ids) == 30, "all 30 tokens are given"
    assert spec.offsets_ok, "every round left the caches in step with the tokens"
    top1 = SamplingParams(temperature=1.5, top_k=1, seed=3)
    assert (
        drive(ChatSession(toy_pair), toy_prompt, FixedDraftLength(3), sampling=top1, max_tokens=48).ids
        == plain_reference["greedy"]
    )


def test_invalid_sampling_settings_are_refused_with_a_reason():
    for bad in (
        dict(temperature=-1),
        dict(top_p=0),
        dict(top_k=-2),
        dict(min_p=1.5),
        dict(repetition_penalty=0),
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SamplingParams(**bad)
    with pytest.raises(ValueError, match="between 1 and 16"):
        FixedDraftLength(17)


def test_the_policy_is_asked_once_per_round_and_its_first_plan_is_played(toy_pair, toy_prompt):
    """The first plan decides whether the draft reads the prompt, then is played as round 0:
    asking again would advance a policy's counters (explorations, neighbour checks) twice."""

    class Counting(FixedDraftLength):
        def __init__(self) -> None:
            super().__init__(2)
            self.asked = 0
            self.played: list[int] = []

        def choose(self, context):
            self.asked += 1
            return super().choose(context) if self.asked > 1 else 5  # round 0 drafts 5, then 2

        def observe(self, event):
            self.played.append(event.k)

    policy = Counting()
    out = drive(ChatSession(toy_pair), toy_prompt, policy, max_tokens=24)
    assert policy.asked == len(policy.played) == len(out.rounds)
    assert policy.played[0] == 5, "the first round drafts the asked 5"
    assert set(policy.played[1:-1]) == {2}, "the rounds between play 2"
