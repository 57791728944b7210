"""Passes of up to nine tokens (draft steps, plain steps, verify passes) as one compiled MLX
function per model, over padded caches.

Why: a small model's step on a GPU is bound by launching a few hundred small kernels, not by its
weights (a 0.5B draft's step costs ten times or more what streaming its weights does).
`mx.compile` records the step's graph once per input shape, fuses its elementwise ops and
replays it, instead of building it again in Python for every token.

MLX keys a compiled graph by its inputs' shapes and treats every Python number the function
reads as a constant: a cache whose write position is a Python int would need a new graph per
token. Here the position is an int32 array, the key and value buffers are the
`PaddedKVCache`'s own (grown only to `key_width` widths, so their shapes repeat), the new
entries are written at the array position (`mx.slice_update`), and the mask hides every entry
at or past the position: one graph per (pass size, buffer width). Attention runs over the whole
buffer: masked entries weigh exactly 0, so the output is the eager pass's up to the order of a
float sum over more (zero) terms.

Outside the graph the cache stays what it was: the compiled function returns the new buffers and
the caller writes them back with `offset += n` as a Python int, so trims, `check_caches` and
rewinds are untouched. Whether a model's passes go through it is measured at the warm-up
(`time_steps`, called by `policy/warmup.py`) or asked for (`ChatSession(compiled_steps=...)`).
"""

from __future__ import annotations

import statistics
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from app.engine.decoding.shapes.buckets import STEP_SIZES
from app.engine.decoding.shapes.padded_cache import PaddedKVCache

TIMING_ROUNDS = 5  # timed passes per size and way at the warm-up; the median is kept
# a size runs compiled only where its median pass is at least this much faster: on a shared
# host repeated medians moved 10-30 %, and on CUDA compiled plain steps that timed 4 % faster
# alone decoded 20 % slower in the loop, where the host's cost per call is what counts
WIN_MARGIN = 0.10


class StepCache:
    """One layer's cache inside the compiled graph: writes at an array position, masks by it."""

    def __init__(self, keys: mx.array, values: mx.array, offset: mx.array) -> None:
        self.keys, self.values, self.offset = keys, values, offset

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        at = self.offset.reshape(1)
        self.keys = mx.slice_update(self.keys, keys, at, axes=(2,))
        self.values = mx.slice_update(self.values, values, at, axes=(2,))
        return self.keys, self.values

    def make_mask(self, n: int, return_array: bool = False, window_size: int | None = None) -> mx.array:
        """True where query i (at position offset + i) may see buffer entry j: the past and the
        pass's own earlier tokens, never the buffer's unwritten or trimmed tail."""
        rows = self.offset + mx.arange(n)[:, None]
        cols = mx.arange(self.keys.shape[2])[None]
        mask = cols <= rows
        if window_size is not None:
            mask = mask & (rows < cols + window_size)
        return mask


class CompiledStep:
    """One model's compiled pass. Call it with a cache and 1-d ids: the logits (1, n, V), the
    cache advanced by n; None where it does not apply (n not a step size, or no buffers yet: the
    eager pass makes them), and then the cache is unchanged."""

    def __init__(self, model: Any) -> None:
        # a weak reference: the compiled function lives in a registry keyed by the model, and
        # must not keep a model that was unloaded alive
        ref = weakref.ref(model)
        layers = len(model.layers)

        def step(ids: mx.array, offset: mx.array, *buffers: mx.array) -> tuple[mx.array, ...]:
            live = ref()
            assert live is not None, "a compiled step outlived its model"
            caches = [StepCache(buffers[2 * i], buffers[2 * i + 1], offset) for i in range(layers)]
            logits = live(ids[None], cache=caches)
            return (logits, *(b for c in caches for b in (c.keys, c.values)))

        self._step = mx.compile(step)
        self.shapes: set[tuple[int, int]] = set()  # (pass size, buffer width) run so far
        self.timing: StepTiming | None = None  # eager against compiled, measured at the warm-up

    def __call__(self, cache: list[Any], ids: mx.array) -> mx.array | None:
        n = ids.shape[0]
        if n not in STEP_SIZES or not compilable(cache):
            return None
        end = cache[0].offset + n
        for layer in cache:
            if not layer.reserve(end):
                return None
        out = self._step(
            ids,
            mx.array(cache[0].offset, dtype=mx.int32),
            *(b for layer in cache for b in (layer.keys, layer.values)),
        )
        for i, layer in enumerate(cache):
            layer.keys, layer.values, layer.offset = out[1 + 2 * i], out[2 + 2 * i], end
        self.shapes.add((n, cache[0].keys.shape[2]))
        return out[0]


_STEPS: dict[int, CompiledStep] = {}  # by id(model); an entry goes with its model


def compiled_step(model: Any) -> CompiledStep:
    """The model's compiled pass, made on first use and shared by every session over it (MLX
    keeps its graphs per shape, so a second answer builds nothing)."""
    key = id(model)
    step = _STEPS.get(key)
    if step is None:
        step = _STEPS[key] = CompiledStep(model)
        weakref.finalize(model, _STEPS.pop, key, None)
    return step


def compilable(cache: list[Any] | None) -> bool:
    """Whether every layer of `cache` is a `PaddedKVCache` (the compiled pass writes its buffers)."""
    return bool(cache) and all(type(layer) is PaddedKVCache for layer in cache or [])


@dataclass(frozen=True, slots=True)
class StepTiming:
    """Median milliseconds per pass, eager and compiled, at each size the session plays."""

    sizes: tuple[int, ...]
    eager_ms: tuple[float, ...]
    compiled_ms: tuple[float, ...]

    @property
    def winning_sizes(self) -> frozenset[int]:
        """The sizes whose compiled pass beat the eager one by `WIN_MARGIN`."""
        return frozenset(
            n
            for n, eager, compiled in zip(self.sizes, self.eager_ms, self.compiled_ms)
            if compiled <= eager * (1 - WIN_MARGIN)
        )

    @property
    def faster(self) -> bool:
        """Whether any size runs compiled."""
        return bool(self.winning_sizes)

    def __str__(self) -> str:
        per = len(self.sizes)
        return (
            f"compiled {sum(self.compiled_ms) / per:.2f} ms against eager {sum(self.eager_ms) / per:.2f} ms "
            f"a pass (medians over sizes {', '.join(map(str, self.sizes))})"
        )


@dataclass(frozen=True, slots=True)
class StepChoice:
    """Whether one model's short passes run compiled, why, and what the warm-up measured."""

    compiled: bool
    reason: str  # "asked", "measured", "not measured", "caches not padded"
    timing: StepTiming | None = None
    sizes: frozenset[int] = frozenset(STEP_SIZES)  # the pass sizes that run compiled, when compiled


@dataclass(frozen=True, slots=True)
class ChosenStep:
    """A model's compiled pass at the sizes chosen for it; a pass of another size declines
    (None) and runs eager."""

    step: CompiledStep
    sizes: frozenset[int]

    def __call__(self, cache: list[Any], ids: mx.array) -> mx.array | None:
        return self.step(cache, ids) if ids.shape[0] in self.sizes else None


@dataclass(frozen=True, slots=True)
class StepChoices:
    main: StepChoice
    draft: StepChoice | None  # None without a draft


def choose(model: Any, cache: list[Any] | None, asked: bool | None) -> StepChoice:
    """Compiled passes where asked (`asked`), else where the warm-up measured them faster; never
    over caches that do not pad keys."""
    if not compilable(cache):
        return StepChoice(False, "caches not padded")
    known = _STEPS.get(id(model))
    timing = known.timing if known is not None else None
    if asked is not None:
        return StepChoice(asked, "asked", timing)
    if timing is None:
        return StepChoice(False, "not measured")
    return StepChoice(timing.faster, "measured", timing, timing.winning_sizes)


def time_steps(
    model: Any, new_cache: Callable[[], list[Any]], prompt: list[int], sizes: tuple[int, ...]
) -> StepTiming:
    """Time eager and compiled passes of each size over a cache holding `prompt`, interleaved
    (the order flips each round, so drift on a shared machine hits both alike), each shape run
    once untimed first; record the medians on the model's compiled step and return them."""
    step = compiled_step(model)
    fed = mx.array(prompt, dtype=mx.uint32)
    ways: dict[str, Callable[[list[Any], mx.array], mx.array | None]] = {
        "eager": lambda cache, ids: model(ids[None], cache=cache),
        "compiled": step,
    }
    caches = {}
    for way in ways:
        caches[way] = new_cache()
        mx.eval(model(fed[None], cache=caches[way]))
    times: dict[tuple[str, int], list[float]] = {(way, n): [] for way in ways for n in sizes}
    for rnd in range(TIMING_ROUNDS + 1):
        order = list(ways) if rnd % 2 else list(reversed(ways))
        for n in sizes:
            ids = mx.array((prompt * n)[:n], dtype=mx.uint32)
            for way in order:
                began = time.perf_counter()
                out = ways[way](caches[way], ids)
                assert out is not None, "a step size over a filled padded cache"
                mx.eval(out)
                if rnd:  # round 0 builds each shape
                    times[way, n].append((time.perf_counter() - began) * 1000)
                for layer in caches[way]:
                    layer.trim(n)
    timing = StepTiming(
        sizes,
        tuple(statistics.median(times["eager", n]) for n in sizes),
        tuple(statistics.median(times["compiled", n]) for n in sizes),
    )
    step.timing = timing
    return timing
