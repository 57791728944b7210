"""The few pass sizes (tokens per model call) the engine runs on a GPU.

MLX on a GPU (Metal, CUDA) builds kernels for every new input shape the first time it meets
it: a catch-up read of 16 skipped tokens once took 37.7 s mid-answer on an H200, and 0.2 s the
next time. Catch-up reads, prefill tails and verify passes come in whatever length the
conversation gives, so without a fixed set every answer meets new shapes. With one, every pass
is split into pieces of these sizes, largest first (125 tokens: 64 + 32 + 16 + 9 + 4); a pass
through a KV cache in pieces is the same computation as one pass, so the output is unchanged,
and the warm-up (`app/engine/policy/warmup.py`) compiles each size once, at load.

MLX's CPU backend runs the same kernels at every shape, so there splitting only costs passes:
bucketing is on by default on a GPU only.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

# a draft step or a verify pass: pending plus up to 8 proposals, the controller's longest draft
# (policy.config.MAX_K; a test checks the two agree)
STEP_SIZES: tuple[int, ...] = tuple(range(1, 10))
# reads: catch-up, prefill chunks and their tails (session.PREFILL_CHUNK is the largest)
READ_SIZES: tuple[int, ...] = (16, 32, 64, 128, 256, 512)
PASS_SIZES: tuple[int, ...] = STEP_SIZES + READ_SIZES


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


def run(model: Any, cache: list[Any], ids: mx.array, bucketed: bool) -> mx.array:
    """The model's logits (1, len(ids), V) for the 1-d `ids` read through `cache`; when
    `bucketed`, in pieces of the pass sizes (lazily, as one pass would be)."""
    n = ids.shape[0]
    if not bucketed or n in PASS_SIZES:
        return model(ids[None], cache=cache)  # type: ignore[no-any-return]
    outs = []
    at = 0
    for size in split(n):
        outs.append(model(ids[at : at + size][None], cache=cache))
        at += size
    return mx.concatenate(outs, axis=1)
