"""Rank 0 reads the caller's mode in the app's words: "plain" and "off" alike, one adaptive
controller per mode across answers, an unknown word refused with the choices."""

from __future__ import annotations

from typing import Any, cast

import pytest

from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.distributed.serve import RankServer
from app.engine.distributed.wire import PolicySpec
from app.engine.policy.adaptive import AdaptiveDraftLength


def _server(toy_pair) -> RankServer:
    # choosing a policy touches neither the ranks nor the caller's stream
    return RankServer(toy_pair, cast(Any, None), cast(Any, None))


@pytest.mark.parametrize("word", ["plain", "off"])
def test_plain_and_off_are_plain_decoding(toy_pair, word):
    assert isinstance(_server(toy_pair).policy(PolicySpec(word)), PlainDecoding)


def test_fixed_adaptive_and_lookup_are_the_apps_policies(toy_pair):
    server = _server(toy_pair)
    fixed = server.policy(PolicySpec("fixed", 3))
    assert isinstance(fixed, FixedDraftLength) and fixed.k == 3
    adaptive = server.policy(PolicySpec("adaptive"))
    assert isinstance(adaptive, AdaptiveDraftLength)
    assert server.policy(PolicySpec("adaptive")) is adaptive  # kept across answers
    assert server.policy(PolicySpec("lookup")) is not adaptive


def test_an_unknown_mode_is_refused_with_the_choices(toy_pair):
    with pytest.raises(ValueError, match="choose one of off, fixed, adaptive, lookup"):
        _server(toy_pair).policy(PolicySpec("sometimes"))
