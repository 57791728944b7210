"""One mode vocabulary and one factory: every path turns a mode word into the same policy."""

from __future__ import annotations

import json

import pytest

from app.engine.decoding.decode import generate
from app.engine.decoding.events import Provenance, TokenEvent
from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.decoding.session import ChatSession
from app.engine.policy.adaptive import AdaptiveDraftLength
from app.engine.policy.modes import (
    PairPolicies,
    SavedState,
    SpeculationMode,
    make_policy,
    remembered,
    state_key,
)
from app.engine.protocol import SpeculationMode as FromProtocol
from app.engine.protocol import SpeculationSettings

PROMPT = [5, 9, 17, 5, 9, 17, 5, 9, 23, 11]


def _answer(pair, policy, tokens: int = 12) -> list[TokenEvent]:
    events = generate(ChatSession(pair), PROMPT, policy=policy, max_tokens=tokens)
    return [e for e in events if isinstance(e, TokenEvent)]


@pytest.mark.parametrize("mode", list(SpeculationMode))
def test_every_mode_reads_back_from_its_word_and_from_itself(mode):
    assert SpeculationMode.parse(mode.value) is mode
    assert SpeculationMode.parse(mode) is mode
    assert SpeculationMode.parse(f" {mode.value.upper()} ") is mode


def test_the_old_word_plain_still_means_off_everywhere():
    assert SpeculationMode.parse("plain") is SpeculationMode.OFF
    assert SpeculationSettings("plain").mode is SpeculationMode.OFF  # a setting saved with it
    assert FromProtocol is SpeculationMode  # the UI's import names the same enum


def test_an_unknown_word_is_refused_with_the_choices():
    with pytest.raises(ValueError) as refused:
        SpeculationMode.parse("sometimes")
    message = str(refused.value)
    assert "'sometimes'" in message
    assert all(m.value in message for m in SpeculationMode)
    with pytest.raises(ValueError, match="unknown mode"):
        SpeculationSettings("sometimes")


def test_the_factory_gives_each_mode_its_policy():
    assert isinstance(make_policy(SpeculationMode.OFF), PlainDecoding)
    fixed = make_policy(SpeculationMode.FIXED, 3)
    assert isinstance(fixed, FixedDraftLength) and fixed.k == 3
    assert isinstance(make_policy(SpeculationMode.ADAPTIVE), AdaptiveDraftLength)
    assert isinstance(make_policy(SpeculationMode.LOOKUP), AdaptiveDraftLength)
    assert make_policy(SpeculationMode.ADAPTIVE) is not make_policy(SpeculationMode.ADAPTIVE)
    with pytest.raises(ValueError):
        make_policy(SpeculationMode.FIXED, 0)


def test_lookup_never_drafts_with_the_draft_model(toy_pair):
    tokens = _answer(toy_pair, make_policy(SpeculationMode.LOOKUP), 24)
    assert tokens and all(t.provenance is not Provenance.DRAFT for t in tokens)


def test_a_state_that_does_not_fit_is_left_out_without_an_error():
    for damaged in ({"version": -1}, {"sources": "nonsense"}, {}):
        assert isinstance(make_policy(SpeculationMode.ADAPTIVE, state=damaged), AdaptiveDraftLength)
        policies = PairPolicies(load=lambda mode, state=damaged: state)
        assert isinstance(policies.policy(SpeculationMode.ADAPTIVE), AdaptiveDraftLength)
        assert not policies.restored


def test_a_pair_keeps_one_controller_per_mode_and_makes_plain_and_fixed_afresh():
    policies = PairPolicies()
    adaptive = policies.policy(SpeculationMode.ADAPTIVE)
    assert policies.policy(SpeculationMode.ADAPTIVE) is adaptive
    assert policies.policy(SpeculationMode.LOOKUP) is not adaptive
    assert policies.policy(SpeculationMode.LOOKUP) is policies.policy(SpeculationMode.LOOKUP)
    fixed = policies.policy(SpeculationMode.FIXED, 6)
    assert isinstance(fixed, FixedDraftLength) and fixed.k == 6
    assert isinstance(policies.policy(SpeculationMode.OFF), PlainDecoding)


def test_a_pair_saves_after_an_answer_and_the_next_load_starts_from_it(toy_pair):
    saved: dict[SpeculationMode, SavedState] = {}
    asked: list[SpeculationMode] = []

    def load(mode: SpeculationMode) -> SavedState | None:
        asked.append(mode)
        return saved.get(mode)

    def save(mode: SpeculationMode, state: SavedState) -> None:
        saved[mode] = json.loads(json.dumps(state))  # JSON-able, as the store keeps it

    first = PairPolicies(load, save)
    first.answered(SpeculationMode.ADAPTIVE)  # nothing has answered yet: nothing to save
    first.answered(SpeculationMode.FIXED)
    assert saved == {}
    _answer(toy_pair, first.policy(SpeculationMode.ADAPTIVE))
    first.answered(SpeculationMode.ADAPTIVE)
    assert set(saved) == {SpeculationMode.ADAPTIVE}, (
        "the adaptive controller's state is saved after an answer"
    )
    assert not first.restored, "a new controller was not restored"

    again = PairPolicies(load, save)
    again.policy(SpeculationMode.ADAPTIVE)
    again.policy(SpeculationMode.ADAPTIVE)
    assert again.restored == {SpeculationMode.ADAPTIVE}
    assert asked == [SpeculationMode.ADAPTIVE, SpeculationMode.ADAPTIVE]  # once per pair's life
    # lookup's controller was never saved: it starts from nothing
    again.policy(SpeculationMode.LOOKUP)
    assert SpeculationMode.LOOKUP not in again.restored


class _Memory:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], object] = {}

    def get(self, kind: str, key: str) -> object | None:
        return self.rows.get((kind, key))

    def put(self, kind: str, key: str, value: object) -> None:
        self.rows[(kind, key)] = value


def test_a_remembered_pair_keeps_its_state_under_its_models_device_and_mode(toy_pair):
    memory = _Memory()
    policies = remembered(memory, "main", "draft", "cpu")
    _answer(toy_pair, policies.policy(SpeculationMode.ADAPTIVE))
    policies.answered(SpeculationMode.ADAPTIVE)
    assert list(memory.rows) == [("controller", state_key("main", "draft", "cpu", "adaptive"))]
    again = remembered(memory, "main", "draft", "cpu")
    again.policy(SpeculationMode.ADAPTIVE)
    assert again.restored == {SpeculationMode.ADAPTIVE}
    for other in (("main", "other", "cpu"), ("main", "draft", "gpu")):
        fresh = remembered(memory, *other)
        fresh.policy(SpeculationMode.ADAPTIVE)
        assert not fresh.restored
    forgetful = remembered(None, "main", "draft", "cpu")
    forgetful.policy(SpeculationMode.ADAPTIVE)
    assert not forgetful.restored
