"""Compile every pass shape the adaptive controller may play before it times any of them.

MLX builds kernels for each new shape on first use, so a shape's first pass can cost several
times the next (docs/measurements/2026-11-23-price-drift.md). The controller
explores a pair with a few rounds at two draft lengths and a plain step, and prices every other
size from them: when those rounds are the first of their shapes, a paying draft is priced
under plain and bypassed. A fixed-k pass at each size first
keeps compile time out of what it measures. `bench` does it before its timed runs; the worker
after loading a pair on a GPU, so that compile time is part of loading, shown as such, and not
of the first answer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import mlx.core as mx

from app.engine.decoding.decode import generate
from app.engine.decoding.events import RoundEvent
from app.engine.decoding.loading import ModelPair
from app.engine.decoding.policy import FixedDraftLength
from app.engine.decoding.session import ChatSession
from app.engine.policy.adaptive import MAX_K


def compiles_per_shape() -> bool:
    """Whether this process's device builds kernels per shape (a GPU: Metal or CUDA). MLX's CPU
    backend runs the same kernels at every shape, so there a warm-up only costs time."""
    return mx.default_device().type == mx.DeviceType.gpu


def compile_pass_shapes(
    pair: ModelPair,
    prompt: list[int],
    max_k: int = MAX_K,
    *,
    cancel: threading.Event | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """One round drafting k tokens for every k up to `max_k`, by default the longest the
    controller plays (fixed k's own first round compiles its size); plain steps come with them;
    the rounds played. Needs a draft model; without one it does nothing. `progress(done, total)`
    follows each size; `cancel` stops between sizes."""
    if pair.draft is None:
        return 0
    rounds = 0
    for k in range(1, max_k + 1):
        if cancel is not None and cancel.is_set():
            break
        # k + 1 tokens: the first round drafts all k, whatever is accepted
        events = generate(
            ChatSession(pair), prompt, policy=FixedDraftLength(k), max_tokens=k + 1, cancel=cancel
        )
        rounds += sum(isinstance(e, RoundEvent) for e in events)
        if progress is not None:
            progress(k, max_k)
    return rounds
