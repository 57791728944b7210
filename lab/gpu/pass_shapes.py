"""What a pass at a new shape costs on this device, and what padded keys and fixed sizes save.

A script, not a test: `python -m lab.gpu.pass_shapes 7b-4bit 1.5b-bf16`. For each
pair's main (random weights of a real shape, toy_pair.py), after a 400-token prompt it times
40 passes of n tokens at context lengths never seen before, then the same lengths again, with
mlx-lm's KV cache and with padded keys (padded_cache.py); and reads of 16, 17, 22 and 52 tokens
the first time and the second. On CUDA, a new (query, key) length builds an attention graph and
a new token count builds quantized-matmul kernels; on a CPU nothing is built per shape.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from app.engine.decoding.shapes.padded_cache import PaddedKVCache
from app.engine.measure.toy_pair import build_pair

PROMPT = 400
PASSES = 40
READS = (16, 17, 22, 52)
SERIES_BUDGET_S = 60.0  # a backend that builds per shape could spend minutes on 40 new lengths


def timed(model: Any, cache: list[Any], ids: list[int]) -> float:
    start = time.perf_counter()
    out = model(mx.array(ids, dtype=mx.uint32)[None], cache=cache)
    mx.eval(out, [c.state for c in cache])
    return time.perf_counter() - start


def median_ms(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2] * 1e3


def series(model: Any, make: Callable[[], Any], n: int) -> tuple[list[float], list[float]]:
    """Passes of n tokens at new context lengths, then at the same lengths again."""
    cache = [make() for _ in model.layers]
    for at in range(0, PROMPT, 128):
        timed(model, cache, list(range(at + 3, at + 131))[: min(128, PROMPT - at)])
    first: list[float] = []
    start = time.perf_counter()
    while len(first) < PASSES and time.perf_counter() - start < SERIES_BUDGET_S:
        first.append(timed(model, cache, [5] * n))
    for c in cache:
        c.trim(len(first) * n)
    second = [timed(model, cache, [5] * n) for _ in first]
    return first, second


def reads(model: Any, make: Callable[[], Any]) -> list[tuple[int, float]]:
    cache = [make() for _ in model.layers]
    timed(model, cache, list(range(3, 303)))
    return [(size, timed(model, cache, [7] * size)) for size in READS + READS]


def main(argv: list[str]) -> int:
    names = argv or ["tiny"]
    print(f"device {mx.default_device()}, mlx {metadata.version('mlx')}; ms per pass", flush=True)
    for name in names:
        model = build_pair(name).main.model
        for make, label in ((KVCache, "mlx-lm cache"), (PaddedKVCache, "padded keys")):
            for n in (1, 4):
                first, second = series(model, make, n)
                print(
                    f"{name:10s} {label:13s} n={n} passes={len(first):2d}  new lengths: median "
                    f"{median_ms(first):7.1f} max {max(first) * 1e3:8.1f}  |  repeated: median "
                    f"{median_ms(second):7.1f} max {max(second) * 1e3:8.1f}",
                    flush=True,
                )
            got = " ".join(f"{size}:{seconds * 1e3:.0f}" for size, seconds in reads(model, make))
            print(f"{name:10s} {label:13s} reads, first then again: {got}", flush=True)
        del model
        mx.clear_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
