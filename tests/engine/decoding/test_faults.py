"""A round that raises after a model pass has grown the caches must leave the session as the
invariant says (caches holding exactly the tokens kept), so the next answer in it is unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.engine.decoding.loading import LoadedModel, ModelPair
from app.engine.decoding.policy import DraftPolicy, FixedDraftLength, PlainDecoding
from app.engine.decoding.session import ChatSession
from tests.engine.helpers import drive


class InjectedFault(RuntimeError):
    pass


class FailingModel:
    """Runs the real model (its cache grows), then raises on the `fail_at`-th call."""

    def __init__(self, model, fail_at: int | None = None) -> None:
        self.model, self.fail_at, self.calls = model, fail_at, 0

    def __call__(self, *args, **kwargs):
        out = self.model(*args, **kwargs)
        self.calls += 1
        if self.calls == self.fail_at:
            raise InjectedFault(f"call {self.calls}")
        return out

    def __getattr__(self, name: str):  # make_prompt_cache reads the layers
        return getattr(self.model, name)


def _failing(model: LoadedModel) -> tuple[LoadedModel, FailingModel]:
    failing = FailingModel(model.model)
    return replace(model, model=failing), failing


CASES = {
    # (which model fails, on which call, the policy): prefill is the first call of each
    "draft mid-proposal": ("draft", 6, lambda: FixedDraftLength(3)),
    "verify of a draft": ("main", 4, lambda: FixedDraftLength(3)),
    "queued plain step": ("main", 6, PlainDecoding),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_round_that_raises_leaves_the_caches_at_the_kept_tokens(toy_pair, toy_prompt, case):
    which, fail_at, policy = CASES[case]
    assert toy_pair.draft is not None
    main, failing_main = _failing(toy_pair.main)
    draft, failing_draft = _failing(toy_pair.draft)
    failing = failing_main if which == "main" else failing_draft
    session = ChatSession(ModelPair(main, draft))
    failing.fail_at = fail_at
    seen: list[int] = []
    with pytest.raises(InjectedFault):
        for event in _tokens(session, toy_prompt, policy()):
            seen.append(event)
    assert failing.calls == fail_at
    assert seen, "the fault came after some tokens were kept"
    # the session holds the prompt and the tokens shown, but the newest (which no model has read)
    assert session.tokens == (toy_prompt + seen)[:-1], (
        "the session holds the prompt and the tokens shown but the newest"
    )
    assert session.main_ahead == 0, "the main is not ahead of the tokens"
    main_offsets, draft_offsets = session.cache_offsets()
    assert set(main_offsets) == {len(session.tokens)}
    assert set(draft_offsets) == {session.draft_offset}, "the draft's caches end at its offset"
    assert session.draft_len <= len(session.tokens), "the draft holds no more than the tokens"

    failing.fail_at = None
    for make in (PlainDecoding, policy):  # the same session answers as a fresh one does
        after = drive(session, toy_prompt, make(), max_tokens=24, stop_ids=[])
        fresh = drive(ChatSession(toy_pair), toy_prompt, PlainDecoding(), max_tokens=24, stop_ids=[])
        assert after.ids == fresh.ids, "the answer after the fault is a fresh session's"
        assert after.offsets_ok, "every round left the caches in step with the tokens"


def test_an_answer_abandoned_under_a_queued_step_rewinds_it(toy_pair, toy_prompt):
    """A consumer that stops reading mid-answer closes the generator while the next plain step
    is queued: that step's token must come back out of the main's cache."""
    session = ChatSession(toy_pair)
    stream = _tokens(session, toy_prompt, PlainDecoding())
    shown = [next(stream) for _ in range(5)]
    assert session.main_ahead == 1  # the sixth step is already fed
    stream.close()
    assert session.main_ahead == 0, "the main is not ahead of the tokens"
    assert session.tokens == (toy_prompt + shown)[:-1], (
        "the session holds the prompt and the tokens shown but the newest"
    )
    assert set(session.cache_offsets()[0]) == {len(session.tokens)}
    after = drive(session, toy_prompt, PlainDecoding(), max_tokens=24, stop_ids=[])
    fresh = drive(ChatSession(toy_pair), toy_prompt, PlainDecoding(), max_tokens=24, stop_ids=[])
    assert after.ids == fresh.ids, "the answer after the fault is a fresh session's"
    assert after.offsets_ok, "every round left the caches in step with the tokens"


def _tokens(session: ChatSession, prompt: list[int], policy: DraftPolicy):
    """The ids of the tokens an answer shows, as they come."""
    from app.engine.decoding.decode import generate
    from app.engine.decoding.events import TokenEvent

    for event in generate(session, prompt, policy=policy, max_tokens=40, stop_ids=[]):
        if isinstance(event, TokenEvent):
            yield event.id
