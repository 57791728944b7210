"""Prompt lookup: proposals from the conversation itself, with their own provenance."""

from __future__ import annotations

from app.engine.decoding.events import Provenance
from app.engine.decoding.loading import load_pair
from app.engine.decoding.lookup import PromptLookup
from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.decoding.session import ChatSession
from app.engine.policy.adaptive import AdaptiveDraftLength
from tests.engine.helpers import drive


def test_longest_recent_match_is_proposed():
    lookup = PromptLookup([1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 1, 2, 3])
    # tail (1, 2, 3) last occurred at the start, followed by 4, 5
    assert lookup.propose(2) == ([4, 5], 3)
    lookup.extend([7])  # tail (2, 3, 7) occurred once: continue with 8
    assert lookup.propose(3) == ([8, 1, 2], 3)
    assert PromptLookup([5, 6, 7]).propose(4) == ([], 0)
    assert lookup.propose(0) == ([], 0)


def test_the_most_recent_occurrence_wins_among_equal_matches():
    lookup = PromptLookup([1, 2, 10, 1, 2, 20, 1, 2])
    assert lookup.propose(1) == ([20], 2)


def test_lookup_alone_needs_no_draft_model_and_keeps_greedy_output(toy_models, toy_prompt):
    pair = load_pair(toy_models.main)
    prompt = toy_prompt * 3  # repeated text: lookup has something to propose
    plain = drive(ChatSession(pair), prompt, PlainDecoding(), max_tokens=40, stop_ids=[])
    for policy in (FixedDraftLength(4, source=Provenance.LOOKUP), AdaptiveDraftLength(use_draft=False)):
        session = ChatSession(pair)
        out = drive(session, prompt, policy, max_tokens=40, stop_ids=[])
        assert out.ids == plain.ids, "the answer is plain decoding's own"
        assert out.offsets_ok, "every round left the caches in step with the tokens"
        lookup_rounds = [r for r in out.rounds if r.source is Provenance.LOOKUP]
        assert lookup_rounds and all(r.k == len(r.proposed) for r in lookup_rounds)
        accepted = [t for t in out.tokens if t.provenance is Provenance.LOOKUP]
        assert len(accepted) == sum(r.accepted for r in lookup_rounds)
        assert not any(t.provenance is Provenance.DRAFT for t in out.tokens)


def test_lookup_and_draft_mix_in_one_answer_with_consistent_caches(toy_pair, toy_prompt):
    prompt = toy_prompt * 3
    plain = drive(ChatSession(toy_pair), prompt, PlainDecoding(), max_tokens=40, stop_ids=[])

    class Alternate(AdaptiveDraftLength):
        turn = 0

        def choose(self, context):
            super().choose(context)
            self.turn += 1
            if (
                self.turn % 2 == 1 and context.lookup_len
            ):  # turn 1 is round 0, where the prompt's tail matches
                return FixedDraftLength(3, source=Provenance.LOOKUP).choose(context)
            return FixedDraftLength(2).choose(context)

    out = drive(ChatSession(toy_pair), prompt, Alternate(), max_tokens=40, stop_ids=[])
    assert out.ids == plain.ids, "the answer is plain decoding's own"
    assert out.offsets_ok, "every round left the caches in step with the tokens"
    assert {r.source for r in out.rounds} >= {Provenance.LOOKUP, Provenance.DRAFT}


def test_shadow_trials_are_decided_at_the_first_miss_or_the_last_token_across_rounds():
    from app.engine.decoding.lookup import ShadowTrials

    shadows = ShadowTrials(keep=4)
    shadows.offer((1, 2, 3))
    shadows.offer(())  # nothing proposed: no trial
    assert shadows.follow([1]) == []  # one match so far: undecided, deep positions not judged yet
    shadows.offer((9, 9))
    assert shadows.follow([2, 3]) == [(3, 3), (2, 0)]  # the first ran out whole, the second missed
    shadows.offer((5, 6))
    assert shadows.follow([5, 7]) == [(2, 1)]
