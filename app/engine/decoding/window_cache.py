"""A sliding-window layer's cache that can be trimmed exactly, so speculation stays lossless.

mlx-lm gives a windowed layer (Gemma 3's local layers, Mistral's window) a rotating buffer of
exactly `window` entries. Once the conversation is past the window, each new token overwrites
the oldest entry; trimming a refused draft afterwards cannot bring the overwritten entries back,
so the next token attends to fewer keys than plain decoding's does and the answer drifts.

This cache keeps `slack` entries more than the window needs (at least a whole window, so an
edited or regenerated turn can usually rewind too) and drops older ones in bulk when its buffer
fills. A trim is exact while the next query still finds its whole window in the buffer
(`exact_trim`); a trim beyond that is still carried out but marks the layer `inexact`, which the
session's cache check reports and repairs instead of answering from a short window.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import RotatingKVCache, make_prompt_cache

# Entries kept beyond the window, at least: more than the longest draft (16) plus its verify pass
MIN_SLACK = 64
STEP = 256  # buffer growth, as mlx-lm's KVCache grows


class WindowedKVCache:
    """Keys and values of one layer that attends to the last `window` positions only.

    Holds positions [start, offset) at buffer indices [0, offset - start)."""

    def __init__(self, window: int, slack: int | None = None) -> None:
        self.window = window
        self.slack = max(window, MIN_SLACK) if slack is None else slack
        self.keys: mx.array | None = None
        self.values: mx.array | None = None
        self.offset = 0
        self.start = 0  # the position of the buffer's first entry (older ones were dropped)
        self.inexact = False  # a trim went further back than the buffer could answer

    def _first_key(self, position: int) -> int:
        """The first position a query at `position` attends to."""
        return max(self.start, position - self.window + 1)

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        prev, new = self.offset, keys.shape[2]
        held = prev - self.start
        if self.keys is None or self.values is None or held + new > self.keys.shape[2]:
            self._regrow(keys, values, prev, new)
            held = prev - self.start
        assert self.keys is not None and self.values is not None
        self.keys[..., held : held + new, :] = keys
        self.values[..., held : held + new, :] = values
        self.offset = prev + new
        lo = self._first_key(prev) - self.start
        return self.keys[..., lo : held + new, :], self.values[..., lo : held + new, :]

    def _regrow(self, keys: mx.array, values: mx.array, prev: int, new: int) -> None:
        """A buffer with room for `new` more entries, without those no trim can ever need again."""
        keep_from = max(self.start, prev - self.window + 1 - self.slack)
        kept = prev - keep_from
        size = -(-(kept + new + STEP) // STEP) * STEP
        batch, heads, _, k_dim = keys.shape
        new_k = mx.zeros((batch, heads, size, k_dim), keys.dtype)
        new_v = mx.zeros((batch, heads, size, values.shape[3]), values.dtype)
        if self.keys is not None and self.values is not None and kept:
            skip = keep_from - self.start
            new_k[..., :kept, :] = self.keys[..., skip : skip + kept, :]
            new_v[..., :kept, :] = self.values[..., skip : skip + kept, :]
        self.keys, self.values, self.start = new_k, new_v, keep_from

    def make_mask(
        self, n: int, window_size: int | None = None, return_array: bool = False
    ) -> mx.array | None:
        """The mask for `n` queries from `offset` over the keys `update_and_fetch` will return:
        query i (at offset + i) sees key j (at first + j) where it is neither ahead nor out of
        the window. A single query is given only keys it may see, so it needs none."""
        window = window_size or self.window
        if n == 1 and not return_array:
            return None
        first = self._first_key(self.offset)
        rows = mx.arange(self.offset, self.offset + n)[:, None]
        cols = mx.arange(first, self.offset + n)[None]
        return (rows >= cols) & (rows < cols + window)

    def exact_trim(self, n: int) -> bool:
        """Whether after trimming `n` entries the next query still finds its whole window."""
        if self.start == 0:
            return True
        return self.offset - n - self.window + 1 >= self.start

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        n = min(n, self.offset - self.start)
        if not self.exact_trim(n):
            self.inexact = True
        self.offset -= n
        return n

    @property
    def state(self) -> tuple[Any, ...]:
        return self.keys, self.values

    @property
    def nbytes(self) -> int:
        if self.keys is None or self.values is None:
            return 0
        return int(self.keys.nbytes + self.values.nbytes)

    def empty(self) -> bool:
        return self.keys is None


def exactly_trimmable(layer: Any) -> bool:
    """Whether `layer` can always be rewound by a draft's length: a rotating buffer cannot once
    it has wrapped, and a recurrent state never can."""
    if isinstance(layer, RotatingKVCache):
        return False
    return bool(layer.is_trimmable())


def can_trim(cache: list[Any], n: int) -> bool:
    """Whether every layer of `cache` can drop its last `n` entries exactly."""
    return all(
        layer.exact_trim(n) if isinstance(layer, WindowedKVCache) else exactly_trimmable(layer)
        for layer in cache
    )


def plain_caches(model: Any) -> list[Any]:
    """The model's own cache, each rotating window layer (mlx-lm's, without kept first tokens)
    replaced by a `WindowedKVCache` of the same window: what every unpadded session uses."""
    return [
        WindowedKVCache(layer.max_size) if isinstance(layer, RotatingKVCache) and layer.keep == 0 else layer
        for layer in make_prompt_cache(model)
    ]
