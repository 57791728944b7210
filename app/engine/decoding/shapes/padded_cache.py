"""A KV cache whose keys come back padded (to 256 or 512 entries, then a power of two), with a
mask that hides the pad.

On CUDA, MLX builds an attention graph for every (query length, key length) pair it has not
seen: a verify pass at a new context length costs about 4.5 plain steps, a repeated one 1.2.
A plain cache hands attention exactly `offset` keys, so the key length is new at every pass
and no verify pass is ever cheap. This cache hands it the first `key_width(offset)` entries of
its buffer instead, with an array mask (query i sees key j only where j <= offset_before + i),
so the key length changes only at those widths and the shapes repeat in between. The padding is the
buffer's own tail: zeros from allocation, or entries a trim left behind (keys and values the
model itself wrote, so finite); masked, each weighs exactly 0, and the attention's output is
the plain cache's. Trim and offset work as in mlx-lm's `KVCache`, which it extends.

A single-token pass (a plain or draft step) gets the exact keys and no mask: on CUDA its
attention kernel builds nothing per key length, and a mask would slow it by about a third.
A compiled pass (`compiled_step.py`) takes
the buffers whole instead (`reserve`) and masks in its own graph. The cache is used on a GPU only
by default (`make_caches`), and on the CPU only where a test asks.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache, make_prompt_cache

from app.engine.decoding.shapes.buckets import on_gpu
from app.engine.decoding.window_cache import plain_caches

KEY_STEP = 256  # KVCache's own allocation step: a padded view is a slice of a buffer it has anyway

# model types whose every layer masks attention with `cache.make_mask`, read from the first
# layer's cache (mlx-lm's create_attention_mask); others keep the plain cache
PADDABLE_MODEL_TYPES = frozenset({"qwen2", "qwen3", "llama", "mistral"})


# Past this many entries widths double instead of stepping: few enough widths for the warm-up to
# build them all (each width adds seconds to a large pair's warm-up), at the price
# of attention over up to twice the keys, a small share of a pass that reads a 7B's weights
LINEAR_WIDTHS_UP_TO = 512


def key_width(length: int) -> int:
    """The key length attention sees for `length` real entries: 256 or 512, then a power of two."""
    width = max(1, -(-length // KEY_STEP)) * KEY_STEP
    if width <= LINEAR_WIDTHS_UP_TO:
        return width
    return 1 << (length - 1).bit_length()


def widths_up_to(length: int) -> list[int]:
    """Every key width a conversation of up to `length` tokens hands attention."""
    widths: list[int] = []
    n = 1
    while not widths or widths[-1] < key_width(length):
        width = key_width(n)
        if not widths or width > widths[-1]:
            widths.append(width)
        n = width + 1
    return widths


class PaddedKVCache(KVCache):
    """mlx-lm's KVCache, but fetching keys and values padded to `key_width(offset)`."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # mlx-lm declares no types

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        prev = self.offset
        end = prev + keys.shape[2]
        width = key_width(end)
        buf_k, buf_v = self.keys, self.values
        if buf_k is None or buf_v is None or buf_k.shape[2] < width:
            buf_k, buf_v = self._grown(keys, values, width)
        buf_k[..., prev:end, :] = keys
        buf_v[..., prev:end, :] = values
        self.keys, self.values, self.offset = buf_k, buf_v, end
        if keys.shape[2] == 1:  # a single query: exact keys, no mask (see the module's docstring)
            width = end
        return buf_k[..., :width, :], buf_v[..., :width, :]

    def reserve(self, end: int) -> bool:
        """Grow the buffers to hold `end` entries, to `key_width(end)` as a pass ending there
        would, for a writer that takes the buffers whole (`compiled_step.py`); False while there
        are none (the first pass makes them, in its keys' shape)."""
        if self.keys is None or self.values is None:
            return False
        if self.keys.shape[2] < end:
            self.keys, self.values = self._grown(self.keys, self.values, key_width(end))
        return True

    def _grown(self, keys: mx.array, values: mx.array, width: int) -> tuple[mx.array, mx.array]:
        """Zero-filled buffers of `width` entries holding the first `offset` of the old ones."""
        batch, heads, _, k_dim = keys.shape
        new_k = mx.zeros((batch, heads, width, k_dim), keys.dtype)
        new_v = mx.zeros((batch, heads, width, values.shape[3]), values.dtype)
        if self.keys is not None and self.values is not None and self.offset:
            new_k[..., : self.offset, :] = self.keys[..., : self.offset, :]
            new_v[..., : self.offset, :] = self.values[..., : self.offset, :]
        return new_k, new_v

    def make_mask(
        self, n: int, return_array: bool = False, window_size: int | None = None
    ) -> mx.array | None:
        """None for a single query with no window (it sees every key it is given); else an
        array (a "causal" string would align queries to the padded end): True where query i
        (at position offset + i) may see key j."""
        if n == 1 and window_size is None:
            return None
        rows = mx.arange(n)[:, None] + self.offset  # an array sum, so the offset is data, not shape
        cols = mx.arange(key_width(self.offset + n))[None]
        mask = rows >= cols
        if window_size is not None:
            mask = mask & (rows < cols + window_size)
        return mask


def paddable(model: Any) -> bool:
    """Whether `model` masks every layer from the first layer's cache, all plain KVCaches."""
    if getattr(model, "model_type", None) not in PADDABLE_MODEL_TYPES:
        return False
    return all(type(c) is KVCache for c in make_prompt_cache(model))


def make_caches(model: Any, padded: bool | None = None) -> list[Any]:
    """The model's prompt cache; padded keys where `padded` (default: on a GPU) and the model
    allows (`paddable`), and windowed layers that trim exactly (`window_cache.py`)."""
    if (on_gpu() if padded is None else padded) and paddable(model):
        return [PaddedKVCache() for _ in model.layers]
    return plain_caches(model)
