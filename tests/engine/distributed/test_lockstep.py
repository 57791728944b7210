"""The main split over local ranks (ring backend, CPU) answers exactly as one process does."""

from __future__ import annotations

from collections.abc import Iterator
from threading import Event

import pytest

from app.engine.decoding.decode import generate
from app.engine.decoding.events import GenerationFinished, TokenEvent
from app.engine.decoding.loading import load_pair
from app.engine.decoding.session import ChatSession
from app.engine.distributed.session import Placement, ShardedPair
from app.engine.distributed.wire import PolicySpec
from app.engine.measure.toy import ToyModels, write_toy_models
from app.engine.policy.modes import PairPolicies, SpeculationMode

TOKENS = 10


def _finished(events: Iterator[object]) -> tuple[int, ...]:
    done = [e for e in events if isinstance(e, GenerationFinished)]
    assert len(done) == 1, f"the answer did not finish: {done}"
    return done[0].token_ids


def _conversation(pair: ShardedPair, models: ToyModels, spec: PolicySpec) -> None:
    """Three turns (a first answer, a follow-up that reuses the caches, an edit that trims them
    back) give the same ids sharded as in one process's session."""
    local = ChatSession(load_pair(models.main, models.draft))
    policies = PairPolicies()  # what rank 0 keeps, in one process
    pair.reset()
    first = pair.render([{"role": "user", "content": "The quick brown fox"}])
    prompts = [first]
    for turn in range(3):
        prompt = prompts[-1]
        sharded = _finished(pair.generate(prompt, spec, max_tokens=TOKENS))
        alone = _finished(
            generate(
                local,
                prompt,
                policy=policies.policy(SpeculationMode.parse(spec.mode), spec.k),
                max_tokens=TOKENS,
            )
        )
        assert sharded == alone, f"turn {turn}"
        # the follow-up extends the answer; the edit keeps only the first half of the prompt
        prompts.append(
            prompt + list(sharded) + [201, 959] if turn == 0 else first[: len(first) // 2] + [316, 90]
        )


@pytest.fixture(scope="module")
def two_ranks(toy_models: ToyModels) -> Iterator[ShardedPair]:
    pair = ShardedPair(toy_models.main, toy_models.draft, Placement(ranks=2))
    yield pair
    pair.close()


def test_two_ranks_plain_is_token_identical(two_ranks: ShardedPair, toy_models: ToyModels) -> None:
    assert two_ranks.can_speculate, "two ranks can speculate"
    assert len(two_ranks.pids) == 2, "one process per rank"
    _conversation(two_ranks, toy_models, PolicySpec("plain"))


def test_two_ranks_fixed_k_is_token_identical(two_ranks: ShardedPair, toy_models: ToyModels) -> None:
    _conversation(two_ranks, toy_models, PolicySpec("fixed", 3))


def test_two_ranks_adaptive_is_token_identical(two_ranks: ShardedPair, toy_models: ToyModels) -> None:
    _conversation(two_ranks, toy_models, PolicySpec("adaptive"))


def test_a_cancelled_answer_leaves_the_ranks_in_step(two_ranks: ShardedPair, toy_models: ToyModels) -> None:
    ids = two_ranks.render([{"role": "user", "content": "Hello"}])
    cancel = Event()
    events = []
    for event in two_ranks.generate(ids, PolicySpec("fixed", 2), max_tokens=200, cancel=cancel, stop_ids=[]):
        events.append(event)
        if isinstance(event, TokenEvent):
            cancel.set()
    finished = events[-1]
    assert isinstance(finished, GenerationFinished) and finished.reason == "cancelled"
    assert len(finished.token_ids) < 200
    # an answer left unread is stopped too; then the next answer is still the main's own
    for _ in two_ranks.generate(ids, PolicySpec("plain"), max_tokens=200, stop_ids=[]):
        break
    _conversation(two_ranks, toy_models, PolicySpec("fixed", 3))


@pytest.mark.heavy  # the two-rank tests above cover the split; a third rank only adds a start-up
def test_three_ranks_agree_and_close_cleanly(toy_models: ToyModels) -> None:
    """A three-way split (heads and KV heads divide by 3) agrees too, and close ends cleanly
    with rank 0's count of the commands it shared."""
    models = write_toy_models(toy_models.main.parent.parent / "tiny3", seed=0, shape="tiny3")
    pair = ShardedPair(models.main, models.draft, Placement(ranks=3))
    try:
        assert len(pair.pids) == 3
        _conversation(pair, models, PolicySpec("fixed", 2))
    finally:
        closing = pair.close()
    assert closing.get("t") == "closed", "the ranks close cleanly"
    assert int(closing["collectives"]) > TOKENS, "rank 0 counts the collectives the answers shared"
    assert pair.exit_code == 0, "every rank ends cleanly on close"
