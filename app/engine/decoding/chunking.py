"""How many prompt tokens one prefill pass reads.

Prefill is cancellable and reports progress only between passes, so a pass must take well under
a second: on a slow CPU one 512-token chunk of a 1.5B main can take a minute, with the
progress stuck at 0 and a Stop that cannot land. Each model's passes are timed as they run,
and the next chunk is the largest that is expected to take `CHUNK_SECONDS`, up to the session's
largest chunk (which a GPU reaches after a pass or two).

A pass costs a fixed part (on a CPU, reading every weight once: 0.2 s for a 0.5B model in
32-bit) and a part per token, so the time is fitted as `overhead + per_token * tokens` over the
sizes seen; a speed measured on a small chunk alone would take the fixed part for slowness and
shrink the chunks to nothing. The fixed part is paid once per pass, so a pass is also made long
enough that the fixed part is at most a third of it (`FIXED_SHARE`): a big model on a slow CPU,
whose passes cost most of a second before reading a single token, would otherwise read a prompt
in twice the time it takes in one pass, for a Stop that lands a second sooner.

Sizes are powers of two from `MIN_CHUNK`, all of them pass sizes a GPU compiles for
(`shapes/buckets.py`); a chunk grows at most `GROWTH` times per pass, so one pass timed fast by
chance cannot ask for a minute-long one. Where a chunk ends changes only rounding in the cache
(as a k-token verify against 1-token steps does), never which tokens are read.
"""

from __future__ import annotations

CHUNK_SECONDS = 0.8  # a pass's target time: progress and a Stop within a second, few passes
FIRST_CHUNK = 16  # before anything is timed
MIN_CHUNK = 4
GROWTH = 4
FIXED_SHARE = 1 / 3  # at most this share of a pass is its fixed cost: prefill at most 1.5x one pass
SMOOTHING = 0.5  # weight of a new time against what was seen before at that size


def fit(times: dict[int, float]) -> tuple[float, float]:
    """(overhead, per-token seconds) fitted to pass times by size; with one size, or times that
    do not grow with size, all of it is taken as per-token or overhead respectively."""
    if len(times) == 1:
        ((n, t),) = times.items()
        return 0.0, t / n
    mean_n = sum(times) / len(times)
    mean_t = sum(times.values()) / len(times)
    spread = sum((n - mean_n) ** 2 for n in times)
    per_token = sum((n - mean_n) * (t - mean_t) for n, t in times.items()) / spread
    if per_token <= 0:
        return max(times.values()), 0.0
    return max(mean_t - per_token * mean_n, 0.0), per_token


class ChunkPacer:
    """Chunk sizes per model ("main", "draft") from each one's timed passes.

    `seconds=None` keeps every chunk at `largest` (fixed chunks, for measurements that need them)."""

    def __init__(self, largest: int, seconds: float | None = CHUNK_SECONDS) -> None:
        if largest < 1:
            raise ValueError(f"a prefill chunk of {largest} tokens")
        self.largest, self.seconds = largest, seconds
        self.times: dict[str, dict[int, float]] = {}  # role -> tokens in a pass -> its seconds
        self.sizes: dict[str, int] = {}  # the last size chosen
        ladder, size = [], MIN_CHUNK
        while size < largest:
            ladder.append(size)
            size *= 2
        self.ladder = [*ladder, largest]

    def predict(self, role: str, tokens: int) -> float | None:
        """Seconds a pass of `tokens` should take: as timed at that size, else from the fit. A
        draft not yet timed is taken to be as slow as the main, which errs towards short passes."""
        seen = self.times.get(role) or self.times.get("main")
        if not seen:
            return None
        if tokens in seen:
            return seen[tokens]
        overhead, per_token = fit(seen)
        return overhead + per_token * tokens

    def size(self, role: str) -> int:
        """Tokens for `role`'s next pass."""
        if self.seconds is None:
            return self.largest
        seen = self.times.get(role) or self.times.get("main")
        if not seen:
            return min(FIRST_CHUNK, self.largest)
        budget = max(self.seconds, fit(seen)[0] / FIXED_SHARE)
        cap = self.sizes.get(role, FIRST_CHUNK) * GROWTH
        best = self.ladder[0]
        for size in self.ladder:
            predicted = self.predict(role, size)
            if size <= cap and predicted is not None and predicted <= budget:
                best = size
        return best

    def record(self, role: str, size: int, tokens: int, seconds: float) -> None:
        """A pass of `tokens` (of the `size` asked) took `seconds`."""
        self.sizes[role] = size
        if tokens < 1 or seconds <= 0:
            return
        seen = self.times.setdefault(role, {})
        old = seen.get(tokens)
        seen[tokens] = seconds if old is None else SMOOTHING * seconds + (1 - SMOOTHING) * old
