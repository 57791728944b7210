"""Property: whatever the accept pattern (and whatever a draft skips instead of reading), the
caches hold exactly the session's tokens and the output is plain decoding's."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.decoding.events import Decision, Reason
from app.engine.decoding.policy import DraftPlan, PlainDecoding, PolicyDefaults, RoundContext
from app.engine.decoding.session import ChatSession
from tests.engine.helpers import drive


class ScriptedPolicy(PolicyDefaults):
    """Drafts the k values it is given, in turn (0 = a plain step), reading at most
    `read_limit` of the tokens the draft has not seen (None: all of them)."""

    def __init__(self, ks: list[int], read_limit: int | None = None) -> None:
        self.ks, self.i, self.read_limit = ks, 0, read_limit

    def choose(self, context: RoundContext) -> DraftPlan:
        k = self.ks[self.i % len(self.ks)]
        self.i += 1
        return DraftPlan(k, read_limit=self.read_limit)

    def decision(self) -> Decision:
        return Decision(Reason.FIXED, self.ks[(self.i - 1) % len(self.ks)])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ks=st.lists(st.integers(0, 8), min_size=1, max_size=6),
    useless=st.booleans(),
    max_tokens=st.integers(1, 20),
    cancel_after=st.one_of(st.none(), st.integers(1, 12)),
    edit_back=st.integers(0, 6),
    read_limit=st.one_of(st.none(), st.integers(0, 3)),
)
def test_cache_offsets_track_tokens_under_random_accept_patterns(
    toy_pair, toy_useless_pair, toy_prompt, ks, useless, max_tokens, cancel_after, edit_back, read_limit
):
    pair = toy_useless_pair if useless else toy_pair
    session = ChatSession(pair)
    first = drive(
        session,
        toy_prompt,
        ScriptedPolicy(ks, read_limit),
        max_tokens=max_tokens,
        cancel_after=cancel_after,
        stop_ids=[],
    )
    assert first.offsets_ok
    assert session.tokens == toy_prompt + first.ids[:-1]
    # a second turn that edits back into the first answer, or beyond it into the prompt
    keep = max(1, len(toy_prompt) + len(first.ids) - edit_back)
    second_prompt = (toy_prompt + first.ids)[:keep] + pair.tokenizer.encode(" next")
    second = drive(
        session, second_prompt, ScriptedPolicy(ks[::-1], read_limit), max_tokens=max_tokens, stop_ids=[]
    )
    assert second.offsets_ok
    fresh = drive(ChatSession(pair), second_prompt, PlainDecoding(), max_tokens=max_tokens, stop_ids=[])
    assert second.ids == fresh.ids
