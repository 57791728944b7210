"""The few pass sizes (tokens per model call) the engine runs on a GPU.

MLX on a GPU (Metal, CUDA) builds kernels for every new input shape the first time it meets
it, which can take seconds where the same pass takes a fraction of one afterwards. Catch-up
reads, prefill tails and verify passes come in whatever length the conversation gives, so
without a fixed set every answer meets new shapes. With one, every pass
runs at one of these sizes, and the warm-up (`app/engine/policy/warmup.py`) compiles each size
once, at load. A read of another length is whole chunks of the largest size, then one pass
padded up to the next size, the pad trimmed off the cache after it (no real token attends to
it, since it comes after them): on MLX's CUDA backend a pass costs much the same at any of these
sizes, so one padded pass costs less than the exact pieces it replaces (125 tokens as 64 + 32 +
16 + 9 + 4 is five passes). Caches that cannot take entries back are read in exact pieces,
largest first.

MLX's CPU backend runs the same kernels at every shape, so there splitting only costs passes:
bucketing is on by default on a GPU only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache

# a draft step or a verify pass: pending plus up to 8 proposals, the controller's longest draft
# (policy.config.MAX_K; a test checks the two agree)
STEP_SIZES: tuple[int, ...] = tuple(range(1, 10))
# reads: catch-up, prefill chunks and their tails (session.PREFILL_CHUNK is the largest)
READ_SIZES: tuple[int, ...] = (16, 32, 64, 128, 256, 512)
PASS_SIZES: tuple[int, ...] = STEP_SIZES + READ_SIZES

# a pass of a step size some other way (`compiled_step.CompiledStep`): the logits, or None where
# it does not apply and the plain pass runs
Step = Callable[[list[Any], mx.array], "mx.array | None"]


def on_gpu() -> bool:
    """Whether this process's device builds kernels per shape (a GPU: Metal or CUDA)."""
    return mx.default_device().type == mx.DeviceType.gpu


def split(n: int) -> list[int]:
    """`n` tokens as pass sizes, largest first; exact, since 1 is a size."""
    if n < 0:
        raise ValueError(f"a pass of {n} tokens")
    pieces: list[int] = []
    for size in reversed(PASS_SIZES):
        while n >= size:
            pieces.append(size)
            n -= size
    return pieces


def passes(n: int, pad: bool) -> list[tuple[int, int]]:
    """(pass size, tokens of `n` it reads) for each pass `run` makes: with `pad`, whole chunks
    of the largest size, then the rest in one pass of the smallest size that holds it; without,
    `split`."""
    if not pad:
        return [(size, size) for size in split(n)]
    largest = PASS_SIZES[-1]
    out = [(largest, largest)] * (n // largest)
    rest = n % largest
    if rest:
        out.append((next(size for size in PASS_SIZES if size >= rest), rest))
    return out


def can_pad(cache: list[Any]) -> bool:
    """Whether a pass's pad can be trimmed back off every layer: plain KV caches (a rotating or
    recurrent cache cannot give entries back)."""
    return all(isinstance(layer, KVCache) for layer in cache)


def run(
    model: Any,
    cache: list[Any],
    ids: mx.array,
    bucketed: bool,
    pad: bool | None = None,
    step: Step | None = None,
) -> mx.array:
    """The model's logits (1, len(ids), V) for the 1-d `ids` read through `cache`; when
    `bucketed`, in passes of the pass sizes (lazily, as one pass would be), a pad trimmed off.
    `pad`: whether a read may be padded (default: where the cache can take a pad back).
    `step`: how a pass of a step size runs, where it can (a compiled pass)."""
    n = ids.shape[0]
    if step is not None and n in STEP_SIZES:
        out = step(cache, ids)
        if out is not None:
            return out
    if not bucketed or n in PASS_SIZES:
        return model(ids[None], cache=cache)  # type: ignore[no-any-return]
    outs = []
    at = 0
    for size, real in passes(n, can_pad(cache) if pad is None else pad):
        piece = ids[at : at + real]
        if size == real:
            outs.append(model(piece[None], cache=cache))
        else:  # the last id again: whatever the pad holds is trimmed unread
            padded = mx.concatenate([piece, mx.repeat(piece[-1:], size - real)])
            outs.append(model(padded[None], cache=cache)[:, :real])
            for layer in cache:
                layer.trim(size - real)
        at += real
    return outs[0] if len(outs) == 1 else mx.concatenate(outs, axis=1)
