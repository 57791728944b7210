"""How many prompt tokens one prefill pass reads.

Prefill is cancellable and reports progress only between passes, so a pass must take well under
a second: a slow CPU reading a 1.5B main took a minute over one 512-token chunk, with the
progress stuck at 0 and a Stop that could not land. Each model's reading speed is measured on
the passes themselves, and the next chunk is sized to take about `CHUNK_SECONDS`, up to the
session's largest chunk (which a GPU reaches after a pass or two).

Sizes are powers of two from `MIN_CHUNK`, all of them pass sizes a GPU compiles for
(`shapes/buckets.py`); a chunk grows at most `GROWTH` times per pass, so one pass timed fast by
chance cannot ask for a minute-long one. Where a chunk ends changes only rounding in the cache
(as a k-token verify against 1-token steps does), never which tokens are read.
"""

from __future__ import annotations

CHUNK_SECONDS = 0.4  # a pass's target time: progress and a Stop every half second or so
FIRST_CHUNK = 16  # before anything is measured
MIN_CHUNK = 4  # smaller passes spend most of their time on per-pass overhead
GROWTH = 4


class ChunkPacer:
    """Chunk sizes per model ("main", "draft") from each one's measured tokens per second.

    `seconds=None` keeps every chunk at `largest` (fixed chunks, for measurements that need them)."""

    def __init__(self, largest: int, seconds: float | None = CHUNK_SECONDS) -> None:
        if largest < 1:
            raise ValueError(f"a prefill chunk of {largest} tokens")
        self.largest, self.seconds = largest, seconds
        self.rates: dict[str, float] = {}  # tokens per second, from the last full pass
        self.sizes: dict[str, int] = {}  # the last size chosen

    def size(self, role: str) -> int:
        """Tokens for `role`'s next pass. A draft not yet timed is sized from the main's speed:
        it reads faster, so that errs towards a shorter pass."""
        if self.seconds is None:
            return self.largest
        rate = self.rates.get(role, self.rates.get("main"))
        if rate is None:
            return min(FIRST_CHUNK, self.largest)
        want = min(rate * self.seconds, self.sizes.get(role, FIRST_CHUNK) * GROWTH)
        if want >= self.largest:
            return self.largest
        size = MIN_CHUNK
        while size * 2 <= want:
            size *= 2
        return min(size, self.largest)

    def record(self, role: str, size: int, tokens: int, seconds: float) -> None:
        """A pass of `tokens` (of the `size` asked) took `seconds`. A short tail is mostly
        per-pass overhead: it sets the speed only where none is known yet."""
        self.sizes[role] = size
        if seconds > 0 and (2 * tokens >= size or role not in self.rates):
            self.rates[role] = tokens / seconds
