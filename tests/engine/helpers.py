"""Small drivers shared by the engine tests."""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from threading import Event
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from app.engine.decoding.decode import generate
from app.engine.decoding.events import (
    EngineError,
    GenerationFinished,
    PrefillProgress,
    RoundEvent,
    TokenEvent,
)
from app.engine.decoding.loading import ModelPair
from app.engine.decoding.policy import DraftPolicy, PlainDecoding
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.session import ChatSession
from lab.replay.simulate import Trace


def next_token_logits(pair: ModelPair, ids: list[int]) -> mx.array:
    """The main's logits for the token after `ids`, from a plain forward pass of the test's own."""
    logits: mx.array = pair.main.model(mx.array(ids, dtype=mx.uint32)[None])
    return logits[0, -1].astype(mx.float32)


@dataclass
class Outcome:
    tokens: list[TokenEvent] = field(default_factory=list)
    rounds: list[RoundEvent] = field(default_factory=list)
    progress: list[PrefillProgress] = field(default_factory=list)
    notices: list[EngineError] = field(default_factory=list)
    finished: GenerationFinished | None = None
    offsets_ok: bool = True

    @property
    def ids(self) -> list[int]:
        return [t.id for t in self.tokens]


def drive(
    session: ChatSession,
    prompt: list[int],
    policy: DraftPolicy | None = None,
    *,
    max_tokens: int = 40,
    sampling: SamplingParams | None = None,
    cancel_after: int | None = None,
    stop_ids: list[int] | None = None,
    acceptance: str | None = None,
) -> Outcome:
    """Run one generation, checking the cache invariant after every round."""
    out = Outcome()
    cancel = Event()
    for event in generate(
        session,
        prompt,
        sampling=sampling,
        policy=policy or PlainDecoding(),
        max_tokens=max_tokens,
        cancel=cancel,
        stop_ids=stop_ids,
        acceptance=acceptance,
    ):
        if isinstance(event, TokenEvent):
            out.tokens.append(event)
            if cancel_after is not None and len(out.tokens) >= cancel_after:
                cancel.set()
        elif isinstance(event, RoundEvent):
            out.rounds.append(event)
            main, draft = session.cache_offsets()
            out.offsets_ok &= all(o == len(session.tokens) + session.main_ahead for o in main)
            out.offsets_ok &= all(o == session.draft_offset for o in draft)
            out.offsets_ok &= session.draft_len <= len(session.tokens)
        elif isinstance(event, PrefillProgress):
            out.progress.append(event)
        elif isinstance(event, EngineError):
            out.notices.append(event)
        elif isinstance(event, GenerationFinished):
            out.finished = event
            # a queued plain step the answer did not use must have been taken back out
            out.offsets_ok &= session.main_ahead == 0
            out.offsets_ok &= all(o == len(session.tokens) for o in session.cache_offsets()[0])
    return out


def copy_with_context(folder: Path, dest: Path, positions: int) -> Path:
    """A copy of a model folder whose config says it reads at most `positions` tokens."""
    shutil.copytree(folder, dest)
    config = json.loads((dest / "config.json").read_text(encoding="utf-8"))
    config["max_position_embeddings"] = positions
    (dest / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return dest


class NoRewindCache(KVCache):
    """A cache that refuses to be trimmed, like a recurrent (Mamba) layer's state."""

    def is_trimmable(self) -> bool:
        return False


class RecurrentLike:
    """A model whose caches cannot be rewound: `model` with `NoRewindCache` layers."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.layers = model.layers

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._model(*args, **kwargs)

    def make_cache(self) -> list[Any]:
        return [NoRewindCache() for _ in self.layers]


class ForwardSpy:
    """A model that records every forward pass (the cache's length before it, the tokens fed)
    and then runs the real one; everything else is the real model's."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.passes: list[tuple[int, int]] = []

    def __call__(self, inputs: Any, cache: Any = None) -> Any:
        offset = getattr(cache[0], "offset", 0) if cache else 0
        # a compiled pass's offset is an array being traced, not a number: recorded as -1
        self.passes.append((offset if isinstance(offset, int) else -1, int(inputs.shape[-1])))
        return self.model(inputs, cache=cache)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    @property
    def sizes(self) -> list[int]:
        """The token count of every pass so far."""
        return [n for _, n in self.passes]


def spied(pair: ModelPair) -> tuple[ModelPair, ForwardSpy, ForwardSpy]:
    """`pair` with both models behind a `ForwardSpy`: (the pair, the main's spy, the draft's)."""
    assert pair.draft is not None
    main, draft = ForwardSpy(pair.main.model), ForwardSpy(pair.draft.model)
    return (
        replace(pair, main=replace(pair.main, model=main), draft=replace(pair.draft, model=draft)),
        main,
        draft,
    )


def agreeing_trace(p_hit: float, seed: int, n: int = 128) -> Trace:
    """A replayable answer of `n` distinct tokens (prompt lookup finds nothing), each a draft hit
    with chance `p_hit`."""
    rng = random.Random(seed)
    answer = tuple(rng.sample(range(1000, 100_000), n))
    return Trace(tuple(range(400)), answer, tuple(rng.random() < p_hit for _ in answer), "agree")
