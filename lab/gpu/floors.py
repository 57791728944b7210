"""What a step cannot cost less than on this device, measured in the run that compares with it.

Two floors per model: a compiled single-token forward with no cache (`mx.compile` of the model
over one token: the fewest launches the backend makes for one step today), and the model's
weight bytes over the memory bandwidth a large copy reaches (every weight is read once per
step, whatever else happens). A draft token costing many times both is paying for something
else: launches, host syncs, graph building.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten

from app.engine.decoding.loading import LoadedModel
from app.engine.decoding.shapes.buckets import on_gpu

# large next to any cache; on a GPU large enough that a launch is a small share of the copy
COPY_MIB = 256
GPU_COPY_MIB = 1024


@dataclass(frozen=True)
class Floors:
    """One model's floors, in seconds per single-token step."""

    compiled_step: float  # a compiled single-token forward with no cache, median
    weight_bytes: int
    bandwidth: float  # bytes per second a large copy reached in the same run

    @property
    def streaming(self) -> float:
        """Seconds to read every weight once at the measured bandwidth."""
        return self.weight_bytes / self.bandwidth if self.bandwidth > 0 else 0.0


def median_seconds(once: Callable[[], float], trials: int) -> float:
    """The median of `trials` timings of `once` (which times itself), after one untimed call
    (the first run of a shape builds its kernels)."""
    once()
    return statistics.median(once() for _ in range(max(trials, 1)))


def weight_bytes(model: Any) -> int:
    """Bytes of every parameter, quantization scales and biases included: what a step reads."""
    leaves: list[tuple[str, Any]] = tree_flatten(model.parameters())  # type: ignore[assignment]  # a module's: a list
    return sum(int(v.nbytes) for _, v in leaves)


def copy_mib() -> int:
    """How large a copy `memory_bandwidth` times on this device."""
    return GPU_COPY_MIB if on_gpu() else COPY_MIB


def memory_bandwidth(mib: int | None = None, trials: int = 5) -> float:
    """Bytes per second of an elementwise copy of `mib` MiB (each element read once and written
    once; `copy_mib()` by default), median of `trials`."""
    mib = mib or copy_mib()
    source = mx.ones((mib * 2**20 // 4,), dtype=mx.float32)
    mx.eval(source)

    def once() -> float:
        start = time.perf_counter()
        copy = source + 1.0
        mx.eval(copy)
        return time.perf_counter() - start

    return 2 * int(source.nbytes) / median_seconds(once, trials)


def compiled_step_seconds(model: Any, token: int, trials: int = 5) -> float:
    """Median seconds of a compiled forward over one token with no cache."""
    step = mx.compile(lambda t: model(t[None]))
    ids = mx.array([token], dtype=mx.uint32)

    def once() -> float:
        start = time.perf_counter()
        mx.eval(step(ids))
        return time.perf_counter() - start

    return median_seconds(once, trials)


def measure_floors(models: list[LoadedModel], token: int, trials: int = 5) -> list[Floors]:
    """Each model's floors, with one bandwidth measured for all."""
    bandwidth = memory_bandwidth(trials=trials)
    return [
        Floors(compiled_step_seconds(m.model, token, trials), weight_bytes(m.model), bandwidth)
        for m in models
    ]
