"""Compiled passes: the eager padded pass's logits and cache, through one graph per shape."""

from __future__ import annotations

import gc
import weakref

import mlx.core as mx
import pytest
from mlx_lm.models.cache import KVCache

from app.engine.decoding.shapes.buckets import STEP_SIZES
from app.engine.decoding.shapes.compiled_step import (
    CompiledStep,
    StepCache,
    StepChoice,
    StepTiming,
    choose,
    compilable,
    compiled_step,
    time_steps,
)
from app.engine.decoding.shapes.padded_cache import PaddedKVCache


def _ids(n: int, seed: int) -> mx.array:
    return mx.random.randint(3, 1000, (n,), key=mx.random.key(seed)).astype(mx.uint32)


def _filled(model, n: int) -> list[PaddedKVCache]:
    cache = [PaddedKVCache() for _ in model.layers]
    mx.eval(model(_ids(n, 0)[None], cache=cache))
    return cache


def test_compiled_passes_give_the_eager_logits_and_cache_across_widths_and_trims(toy_pair):
    model = toy_pair.main.model
    step = compiled_step(model)
    eager, compiled = _filled(model, 240), _filled(model, 240)
    # passes of every step size, a trim between some, and the buffer's 256 entries crossed
    script = [(1, 0), (9, 2), (1, 0), (4, 4), (7, 0), (2, 1), (1, 0), (8, 3), (9, 0), (3, 0), (1, 0)]
    for i, (n, drop) in enumerate(script):
        ids = _ids(n, 10 + i)
        want = model(ids[None], cache=eager)
        got = step(compiled, ids)
        assert got is not None and got.shape == want.shape
        assert mx.allclose(want, got, atol=1e-4, rtol=1e-4).item(), f"pass {i} of {n} tokens"
        assert mx.array_equal(mx.argmax(want, axis=-1), mx.argmax(got, axis=-1)).item()
        assert [c.offset for c in compiled] == [c.offset for c in eager]
        for cache in (eager, compiled):
            for c in cache:
                c.trim(drop)
    end = compiled[0].offset
    assert end > 256, "the answer crossed the first buffer's 256 entries"
    assert all(c.keys.shape[2] == 512 for c in compiled), (
        "every layer grew to the next key width"
    )  # grown to a key width
    for e, c in zip(eager, compiled, strict=True):
        assert mx.allclose(e.keys[..., :end, :], c.keys[..., :end, :], atol=1e-5).item()
        assert mx.allclose(e.values[..., :end, :], c.values[..., :end, :], atol=1e-5).item()
    assert {(n, 256) for n in (1, 9, 4, 7)} | {(2, 512), (1, 512)} <= step.shapes


def test_it_declines_where_it_does_not_apply_and_leaves_the_cache_alone(toy_pair):
    model = toy_pair.main.model
    step = compiled_step(model)
    assert step([PaddedKVCache() for _ in model.layers], _ids(1, 1)) is None  # no buffers yet
    cache = _filled(model, 20)
    assert step(cache, _ids(len(STEP_SIZES) + 1, 2)) is None  # not a step size
    assert [c.offset for c in cache] == [20] * len(cache)
    plain = [KVCache() for _ in model.layers]
    mx.eval(model(_ids(20, 0)[None], cache=plain))
    assert not compilable(plain), "a plain cache cannot run a compiled pass"
    assert step(plain, _ids(1, 3)) is None, "the step declines a plain cache"
    assert plain[0].offset == 20


def test_one_compiled_pass_per_model_and_it_goes_with_the_model(toy_pair):
    assert compiled_step(toy_pair.main.model) is compiled_step(toy_pair.main.model)
    assert compiled_step(toy_pair.draft.model) is not compiled_step(toy_pair.main.model)

    class Unloaded:
        layers = toy_pair.draft.model.layers

        def __call__(self, inputs, cache=None):
            return toy_pair.draft.model(inputs, cache=cache)

    model = Unloaded()
    step = compiled_step(model)
    assert isinstance(step, CompiledStep)
    gone = weakref.ref(step)
    del model, step
    gc.collect()
    assert gone() is None, "an unloaded model leaves no compiled pass behind"


def test_the_choice_follows_the_ask_then_the_timing_and_never_unpadded_caches(toy_pair, monkeypatch):
    model = toy_pair.draft.model
    padded = [PaddedKVCache() for _ in model.layers]
    plain = [KVCache() for _ in model.layers]
    step = compiled_step(model)
    monkeypatch.setattr(step, "timing", None)
    assert choose(model, plain, True).compiled is False
    assert choose(model, plain, True).reason == "caches not padded"
    assert (choose(model, padded, None).compiled, choose(model, padded, None).reason) == (
        False,
        "not measured",
    )
    assert choose(model, padded, True).compiled, "asked for, compiled passes are used"
    assert not choose(model, padded, False).compiled, "asked not to, they are not"
    slower = StepTiming((1,), (2.0,), (3.0,))
    monkeypatch.setattr(step, "timing", slower)
    assert choose(model, padded, None) == StepChoice(False, "measured", slower, frozenset())
    assert choose(model, padded, True) == StepChoice(True, "asked", slower)
    faster = StepTiming((1, 2), (2.0, 3.0), (1.5, 3.0))
    monkeypatch.setattr(step, "timing", faster)
    assert choose(model, padded, None).compiled
    assert choose(model, padded, None).sizes == {1}  # size 2 tied: it stays eager
    assert "compiled 2.25 ms against eager 2.50 ms" in str(faster)
    within_noise = StepTiming((1,), (2.0,), (1.9,))  # 5 % is inside a shared host's noise
    monkeypatch.setattr(step, "timing", within_noise)
    assert not choose(model, padded, None).compiled


def test_timing_records_both_ways_per_size_on_the_model(toy_pair, monkeypatch):
    model = toy_pair.draft.model
    monkeypatch.setattr(compiled_step(model), "timing", None)
    timing = time_steps(model, lambda: [PaddedKVCache() for _ in model.layers], [5, 6, 7, 8], (1, 3))
    assert timing.sizes == (1, 3), "both asked sizes are timed"
    assert len(timing.eager_ms) == len(timing.compiled_ms) == 2, "each size is timed eager and compiled"
    assert all(ms > 0 for ms in timing.eager_ms + timing.compiled_ms)
    assert compiled_step(model).timing is timing


@pytest.mark.parametrize("window", [None, 3])
def test_the_in_graph_mask_hides_the_tail_and_the_future(window):
    buf = mx.zeros((1, 1, 8, 2))
    mask = StepCache(buf, buf, mx.array(4, dtype=mx.int32)).make_mask(2, window_size=window)
    seen = [[j for j in range(8) if mask[i, j].item()] for i in range(2)]
    if window is None:
        assert seen == [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]]
    else:
        assert seen == [[2, 3, 4], [3, 4, 5]]
