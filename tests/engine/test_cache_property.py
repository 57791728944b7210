"""Property: whatever the accept pattern, the caches hold exactly the session's tokens."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.events import RoundEvent
from app.engine.policy import PlainDecoding, RoundContext
from app.engine.session import ChatSession
from tests.engine.helpers import drive


class ScriptedPolicy:
    """Drafts the k values it is given, in turn (0 = a plain step)."""

    def __init__(self, ks: list[int]) -> None:
        self.ks, self.i = ks, 0

    def choose(self, context: RoundContext) -> int:
        k = self.ks[self.i % len(self.ks)]
        self.i += 1
        return k

    def observe(self, event: RoundEvent) -> None:
        pass

    def snapshot(self) -> dict[str, object]:
        return {"policy": "scripted"}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ks=st.lists(st.integers(0, 8), min_size=1, max_size=6),
    useless=st.booleans(),
    max_tokens=st.integers(1, 20),
    cancel_after=st.one_of(st.none(), st.integers(1, 12)),
    edit_back=st.integers(0, 6),
)
def test_cache_offsets_track_tokens_under_random_accept_patterns(
    toy_pair, toy_useless_pair, toy_prompt, ks, useless, max_tokens, cancel_after, edit_back
):
    pair = toy_useless_pair if useless else toy_pair
    session = ChatSession(pair)
    first = drive(session, toy_prompt, ScriptedPolicy(ks), max_tokens=max_tokens, cancel_after=cancel_after, stop_ids=[])
    assert first.offsets_ok
    assert session.tokens == toy_prompt + first.ids[:-1]
    # a second turn that edits back into the first answer, or beyond it into the prompt
    keep = max(1, len(toy_prompt) + len(first.ids) - edit_back)
    second_prompt = (toy_prompt + first.ids)[:keep] + pair.tokenizer.encode(" next")
    second = drive(session, second_prompt, ScriptedPolicy(ks[::-1]), max_tokens=max_tokens, stop_ids=[])
    assert second.offsets_ok
    fresh = drive(ChatSession(pair), second_prompt, PlainDecoding(), max_tokens=max_tokens, stop_ids=[])
    assert second.ids == fresh.ids
