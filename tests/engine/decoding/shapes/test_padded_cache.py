"""Padded keys: attention sees a few key lengths, and the model's output is the plain cache's."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.models.cache import KVCache

from app.engine.decoding.caches import misfit
from app.engine.decoding.shapes.padded_cache import KEY_STEP, PaddedKVCache, key_width, make_caches, paddable

# odd lengths, so that passes end inside and across the 256-entry steps
CHUNKS = [37, 1, 5, 200, 9, 1, 64, 3, 1, 250, 2]


class Watched(PaddedKVCache):
    """Records the key length each pass's attention was handed."""

    widths: list[int]

    def update_and_fetch(self, keys, values):
        out = super().update_and_fetch(keys, values)
        self.widths.append(out[0].shape[2])
        return out


def _ids(n: int, seed: int) -> mx.array:
    return mx.random.randint(3, 1000, (n,), key=mx.random.key(seed)).astype(mx.uint32)


def test_key_width_steps_at_256_and_512_entries_then_doubles():
    assert [key_width(n) for n in (0, 1, 255, 256, 257, 512)] == [256, 256, 256, 256, 512, 512]
    # past 512 entries widths double, so a long conversation meets few of them (and the warm-up
    # builds each)
    assert [key_width(n) for n in (513, 600, 1024, 1025, 2049, 5000)] == [1024, 1024, 1024, 2048, 4096, 8192]


def test_same_logits_and_tokens_as_the_plain_cache_and_only_padded_key_lengths(toy_pair):
    model = toy_pair.main.model
    plain = [KVCache() for _ in model.layers]
    padded = [Watched() for _ in model.layers]
    for c in padded:
        c.widths = []
    for i, n in enumerate(CHUNKS):
        ids = _ids(n, i)
        want, got = model(ids[None], cache=plain), model(ids[None], cache=padded)
        assert mx.allclose(want, got, atol=1e-4, rtol=1e-4).item(), f"pass {i} of {n} tokens"
        assert mx.array_equal(mx.argmax(want, axis=-1), mx.argmax(got, axis=-1)).item()
        assert [c.offset for c in padded] == [c.offset for c in plain]
    widths = padded[0].widths
    ends = [sum(CHUNKS[: i + 1]) for i in range(len(CHUNKS))]
    multi = [w for w, n in zip(widths, CHUNKS, strict=True) if n > 1]
    # 573 entries in the end: passes of several tokens see three key lengths
    assert set(multi) == {256, 512, 1024}, "passes of several tokens see three key widths"
    assert all(w % KEY_STEP == 0 for w in multi), "every width is a whole number of key steps"
    assert multi == sorted(multi), "widths only grow"
    assert len(widths) == len(CHUNKS), "one width per pass"
    # a single-token pass sees exactly the keys there are, with no mask (cheaper on CUDA)
    assert [w for w, n, end in zip(widths, CHUNKS, ends, strict=True) if n == 1] == [
        end for n, end in zip(CHUNKS, ends, strict=True) if n == 1
    ]


def test_trims_keep_offsets_and_the_output(toy_pair):
    """Trimmed entries stay in the buffer as padding; attention must not see them."""
    model = toy_pair.main.model
    plain = [KVCache() for _ in model.layers]
    padded = [PaddedKVCache() for _ in model.layers]
    for i, (n, drop) in enumerate([(40, 7), (300, 250), (3, 1), (9, 9), (20, 0)]):
        ids = _ids(n, 100 + i)
        model(ids[None], cache=plain)
        model(ids[None], cache=padded)
        for cache in (plain, padded):
            for c in cache:
                assert c.trim(drop) == drop
        assert misfit(padded, plain[0].offset) is None
        probe = _ids(4, 200 + i)
        want, got = model(probe[None], cache=plain), model(probe[None], cache=padded)
        assert mx.allclose(want, got, atol=1e-4, rtol=1e-4).item()
        for cache in (plain, padded):
            for c in cache:
                c.trim(4)


def test_the_mask_hides_the_padding_and_the_future():
    cache = PaddedKVCache()
    cache.offset = 300
    mask = cache.make_mask(3)
    assert mask.shape == (3, 512) and mask.dtype == mx.bool_
    assert mask[:, :301].sum(axis=1).tolist() == [301, 301, 301]  # all the past
    assert mask[:, 301:].sum(axis=1).tolist() == [0, 1, 2]  # the pass's own earlier tokens, no pad
    assert not mask[:, 303:].any().item()
    assert cache.make_mask(1) is None  # one query sees every key it is handed: the exact ones


def test_garbage_in_the_unused_buffer_does_not_change_the_output(toy_pair):
    """A buffer's tail holds zeros or entries a trim left; even large ones weigh nothing."""
    model = toy_pair.main.model
    plain = [KVCache() for _ in model.layers]
    padded = [PaddedKVCache() for _ in model.layers]
    ids = _ids(30, 7)
    model(ids[None], cache=plain)
    model(ids[None], cache=padded)
    for c in padded:
        c.keys[..., 30:, :] = 1e4
        c.values[..., 30:, :] = -1e4
    probe = _ids(5, 8)
    got = model(probe[None], cache=padded)
    assert mx.isfinite(got).all().item()
    assert mx.allclose(model(probe[None], cache=plain), got, atol=1e-4, rtol=1e-4).item()


def test_padded_caches_only_where_asked_and_the_model_allows(toy_pair):
    model = toy_pair.main.model
    assert paddable(model)
    assert all(type(c) is PaddedKVCache for c in make_caches(model, padded=True))
    assert all(type(c) is KVCache for c in make_caches(model, padded=False))


def test_a_model_of_another_type_keeps_its_own_cache(toy_pair):
    class Other:
        model_type = "gemma3"
        layers = toy_pair.main.model.layers

    assert not paddable(Other())
    assert all(type(c) is KVCache for c in make_caches(Other(), padded=True))


@pytest.mark.parametrize("n", [1, 8, 257])
def test_passes_of_any_length_fill_the_cache_as_kvcache_does(n):
    cache = PaddedKVCache()
    keys = mx.ones((1, 2, n, 4))
    got_k, got_v = cache.update_and_fetch(keys, keys * 2)
    width = n if n == 1 else key_width(n)  # a single token's pass is handed the exact keys
    assert cache.offset == n, f"the cache holds all {n} tokens"
    assert got_k.shape[2] == width == got_v.shape[2], "keys and values are handed at the padded width"
    assert mx.array_equal(got_k[..., :n, :], keys).item()
    assert not got_k[..., n:, :].any().item()  # zeros from allocation


def test_reserve_grows_to_a_key_width_and_keeps_what_the_cache_holds():
    cache = PaddedKVCache()
    assert not cache.reserve(10)  # no buffers before the first pass: it makes them
    keys = mx.arange(2 * 3 * 4, dtype=mx.float32).reshape(1, 2, 3, 4)
    cache.update_and_fetch(keys, -keys)
    assert cache.reserve(256) and cache.keys.shape[2] == 256  # already wide enough
    assert cache.reserve(300) and cache.keys.shape[2] == cache.values.shape[2] == key_width(300) == 512
    assert cache.offset == 3
    assert mx.array_equal(cache.keys[..., :3, :], keys).item()
    assert mx.array_equal(cache.values[..., :3, :], -keys).item()
    assert not cache.keys[..., 3:, :].any().item()
