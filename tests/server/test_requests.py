"""A request's `speculation` is read in the app's words, and a wrong one is a 400 naming it."""

from __future__ import annotations

import pytest

from app.engine.protocol import SpeculationMode
from app.server.errors import ApiError
from app.server.requests import parse_chat

ASK = [{"role": "user", "content": "hi"}]


def _speculation(value: object):
    return parse_chat({"messages": ASK, "speculation": value}, cap=64).options.speculation


@pytest.mark.parametrize(
    ("value", "mode", "k"),
    [
        ("off", SpeculationMode.OFF, 4),
        ("plain", SpeculationMode.OFF, 4),  # the older word for off
        ("adaptive", SpeculationMode.ADAPTIVE, 4),
        ("lookup", SpeculationMode.LOOKUP, 4),
        ({"mode": "fixed", "k": 6}, SpeculationMode.FIXED, 6),
    ],
)
def test_speculation_is_read_as_the_apps_mode(value, mode, k):
    settings = _speculation(value)
    assert settings is not None, "a speculation setting is read"
    assert settings.mode is mode, "the mode is the app's own word for it"
    assert settings.k == k, "k is kept as given"


def test_no_speculation_leaves_the_servers_own():
    assert parse_chat({"messages": ASK}, cap=64).options.speculation is None


@pytest.mark.parametrize("value", ["sometimes", {"mode": 3}, {"k": 2}, 7])
def test_a_wrong_speculation_is_a_400_naming_the_field(value):
    with pytest.raises(ApiError) as refused:
        _speculation(value)
    assert refused.value.status == 400, "a wrong speculation setting is a 400"
    assert refused.value.param == "speculation", "the error names the speculation field"
    assert "speculation" in str(refused.value)
