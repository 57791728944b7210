"""A rank that stops answering ends the answer with a message instead of hanging it."""

from __future__ import annotations

import os
import signal

import pytest

from app.engine.decoding.decode import generate
from app.engine.decoding.events import EngineError, GenerationFinished, TokenEvent
from app.engine.decoding.loading import load_pair
from app.engine.decoding.session import ChatSession
from app.engine.distributed.hosts import HostfileError
from app.engine.distributed.session import Placement, RanksLost, ShardedPair
from app.engine.distributed.wire import PolicySpec, RankInfo, version_mismatch
from app.engine.measure.toy import ToyModels


def test_a_silent_rank_ends_the_answer_and_the_pair_answers_locally(toy_models: ToyModels) -> None:
    pair = ShardedPair(toy_models.main, toy_models.draft, Placement(ranks=2))
    follower = pair.pids[1]
    events: list[object] = []
    try:
        ids = pair.render([{"role": "user", "content": "Hello"}])
        # no stop token, and far more tokens than can be written before the follower is stopped
        for event in pair.generate(ids, PolicySpec("fixed", 2), max_tokens=300, stop_ids=[]):
            events.append(event)
            if isinstance(event, TokenEvent) and event.index == 0:
                # a short wait for word from now on, when silence is sure: on a busy machine a
                # live rank can be slower than that at start-up
                pair.floor_s = 3.0
                os.kill(follower, signal.SIGSTOP)  # alive but silent: its collectives never answer
        with pytest.raises(RanksLost):
            list(pair.generate(ids, PolicySpec("plain"), max_tokens=4))
    finally:
        pair.close()
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert tokens, "tokens came before the rank was lost"
    assert not any(isinstance(e, GenerationFinished) for e in events), (
        "the answer does not claim to have finished"
    )
    last = events[-1]
    assert isinstance(last, EngineError) and "lost a rank" in last.message, "a lost rank is said in words"
    assert "no word" in last.message, "the words say the rank stopped answering"
    # what was streamed is the main's own answer so far, and the pair still loads and answers here
    local = ChatSession(load_pair(toy_models.main, toy_models.draft))
    done = [
        e
        for e in generate(local, ids, max_tokens=len(tokens), stop_ids=[])
        if isinstance(e, GenerationFinished)
    ]
    assert done[0].token_ids == tuple(t.id for t in tokens)


def test_different_versions_are_named() -> None:
    infos = [
        RankInfo(0, "studio", 10, "0.32.4", "0.1.0"),
        RankInfo(1, "mini", 11, "0.32.4", "0.1.0"),
        RankInfo(2, "air", 12, "0.31.0", "0.1.0"),
    ]
    message = version_mismatch(infos)
    assert message is not None
    assert "rank 2 (air) runs MLX 0.31.0" in message and "rank 0 (studio) runs MLX 0.32.4" in message
    assert "mini" not in message
    assert version_mismatch(infos[:2]) is None


def test_a_hostfile_that_is_not_there_is_named(tmp_path) -> None:
    with pytest.raises(HostfileError, match=r"hosts\.json does not exist"):
        ShardedPair("main", None, Placement(hostfile=str(tmp_path / "hosts.json")))


@pytest.mark.heavy  # the preflight refuses it before any rank starts (test_split_refusals)
def test_a_main_that_cannot_be_split_is_refused_by_every_rank(toy_models: ToyModels) -> None:
    """The toy main's 4 heads do not divide by 3: each rank says so before loading weights."""
    with pytest.raises(RanksLost) as refused:
        ShardedPair(toy_models.main, None, Placement(ranks=3))
    message = str(refused.value)
    assert message.startswith("could not start the ranks")
    assert all(f"rank {r} (" in message for r in range(3)), "every rank is named"
    assert "does not divide by 3 ranks" in message, "the reason says the model does not divide by 3 ranks"
