"""The speculation modes and the one place a mode becomes a draft policy.

Every path that answers (the app's worker, the public API, the sharded server, `bench`, the
arena, `gpu_bench`) turns a mode into a policy here, so "adaptive" is the same controller
everywhere, kept across a loaded pair's answers (`PairPolicies`). The window, the server,
`load_pair`, `bench` and the arena start it from what it learnt about the pair on this device
and save it after each answer (`remembered`), so a benchmark measures what a user gets; a split
main starts cold, since its costs are no one device's.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Protocol

from app.engine.decoding.policy import DraftPolicy, FixedDraftLength, PlainDecoding
from app.engine.policy.adaptive import AdaptiveDraftLength

# what settings, scripts and the public API said for "off" before the vocabulary was one
_OLD_WORDS = {"plain": "off"}


class SpeculationMode(enum.StrEnum):
    """How drafts are proposed; the values are what settings store."""

    OFF = "off"  # plain decoding
    FIXED = "fixed"  # always k drafted tokens
    ADAPTIVE = "adaptive"  # k chosen each round (draft model or prompt lookup), bypassed when it does not pay
    LOOKUP = "lookup"  # adaptive over prompt lookup alone

    @classmethod
    def parse(cls, text: str) -> SpeculationMode:
        """The mode a word names, in any case; "plain" still means off, so saved settings and
        scripts that said it keep working. Raises ValueError naming the choices."""
        if isinstance(text, cls):
            return text
        word = str(text).strip().lower()
        try:
            return cls(_OLD_WORDS.get(word, word))
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown mode {text!r}: choose one of {choices}") from None

    @property
    def adaptive(self) -> bool:
        """Whether its policy learns across answers (kept per loaded pair, its state saved)."""
        return self in (SpeculationMode.ADAPTIVE, SpeculationMode.LOOKUP)


SavedState = dict[str, Any]


class Memory(Protocol):
    """Where controllers' saved states live across sessions (the library's `Store`)."""

    def get(self, kind: str, key: str) -> Any | None: ...

    def put(self, kind: str, key: str, value: Any) -> None: ...


def _adaptive(mode: SpeculationMode, state: object) -> tuple[AdaptiveDraftLength, bool]:
    """A fresh controller for `mode`, and whether `state` was restored into it (a state from an
    older controller, another mode or a damaged store is left out: it starts from nothing)."""
    policy = AdaptiveDraftLength(use_draft=mode is SpeculationMode.ADAPTIVE)
    return policy, state is not None and policy.restore_state(state)


def make_policy(mode: SpeculationMode, k: int = 4, state: SavedState | None = None) -> DraftPolicy:
    """The policy of `mode`: plain, `k` drafted tokens, or a fresh adaptive controller that
    starts from `state` (a pair's saved state) where it fits."""
    match SpeculationMode.parse(mode):
        case SpeculationMode.OFF:
            return PlainDecoding()
        case SpeculationMode.FIXED:
            return FixedDraftLength(k)
        case adaptive:
            return _adaptive(adaptive, state)[0]


class PairPolicies:
    """The policies of one loaded pair: one adaptive controller per mode, kept across answers,
    restored from and saved to the pair's memory."""

    def __init__(
        self,
        load: Callable[[SpeculationMode], SavedState | None] = lambda m: None,
        save: Callable[[SpeculationMode, SavedState], None] = lambda m, s: None,
    ) -> None:
        self._load, self._save = load, save
        self._adaptive: dict[SpeculationMode, AdaptiveDraftLength] = {}
        self.restored: set[SpeculationMode] = set()  # the modes whose saved state was taken up

    def policy(self, mode: SpeculationMode, k: int = 4) -> DraftPolicy:
        """Plain and fixed are made afresh (they keep nothing); an adaptive mode's controller
        is made once, from the memory, and is the same object every time after."""
        mode = SpeculationMode.parse(mode)
        if not mode.adaptive:
            return make_policy(mode, k)
        if mode not in self._adaptive:
            policy, restored = _adaptive(mode, self._load(mode))
            self._adaptive[mode] = policy
            if restored:
                self.restored.add(mode)
        return self._adaptive[mode]

    def learnt(self, mode: SpeculationMode) -> SavedState | None:
        """What the mode's controller has learnt so far; None for plain or fixed, or an adaptive
        mode that has not answered."""
        policy = self._adaptive.get(SpeculationMode.parse(mode))
        return None if policy is None else policy.export_state()

    def answered(self, mode: SpeculationMode) -> None:
        """After each answer: save what the mode's controller has learnt."""
        mode = SpeculationMode.parse(mode)
        state = self.learnt(mode)
        if state is not None:
            self._save(mode, state)

    # a controller that runs in another process (rank 0 of a split main) starts from what the
    # memory holds here, and what it learnt comes back to be kept

    def saved(self, mode: SpeculationMode) -> SavedState | None:
        """The state the memory holds for `mode` (None for plain or fixed)."""
        mode = SpeculationMode.parse(mode)
        return self._load(mode) if mode.adaptive else None

    def keep(self, mode: SpeculationMode, state: SavedState) -> None:
        """Save what `mode`'s controller in the other process learnt."""
        mode = SpeculationMode.parse(mode)
        if mode.adaptive:
            self._save(mode, state)


def state_key(main: str, draft: str | None, device: str, mode: str) -> str:
    """Where a pair's controller state is kept: what it learns is these models' costs on this
    device, in this mode."""
    return "|".join((main, draft or "", device, mode))


def remembered(
    memory: Memory | None, main: str, draft: str | None, device: str | None = None
) -> PairPolicies:
    """A pair's policies whose adaptive controllers start from, and save to, `memory` under
    the pair's two models and the device (what a controller learns is this machine's costs;
    None: MLX's default device); no memory: they keep nothing beyond the pair's life."""
    if memory is None:
        return PairPolicies()
    store = memory
    if device is None:
        import mlx.core as mx

        device = str(mx.default_device())

    def key(mode: SpeculationMode) -> str:
        return state_key(main, draft, device, mode)

    def load(mode: SpeculationMode) -> SavedState | None:
        state = store.get("controller", key(mode))
        return state if isinstance(state, dict) else None

    def save(mode: SpeculationMode, state: SavedState) -> None:
        store.put("controller", key(mode), state)

    return PairPolicies(load, save)
