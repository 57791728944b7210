"""Lock-step ranks: rank 0 decides, the other ranks run the same main passes on their shards.

Rank 0 runs the ordinary decode loop with the main model wrapped in `ShardedMain`. Before each
main pass it shares one small command with every rank through `all_sum` (rank 0 contributes the
values, the others zeros): the token ids and the cache offset the pass starts at. A follower
trims its own cache to that offset and runs the pass on its shard. So every decision that hangs
on timing or randomness (the adaptive k, a sampled token, how many drafts were accepted, trims,
an edited conversation) is taken on rank 0 only and reaches the followers as its effect on the
main's cache: which ids are fed at which offset. The followers never sample and never trim on
their own, so they cannot diverge.

A KV cache trimmed to `offset` holds exactly what one fed only the first `offset` tokens holds,
so sending the offset with each pass replaces sending every trim (trims happen per layer, often
several per round, and would each cost a collective).

The draft runs on rank 0 only: a small draft's step is cheap on one machine, and a replicated
or sharded draft would add memory on every rank and a collective per draft step (each one a
network round trip) to save a step that costs less than that round trip.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

OP_STOP = 1
OP_FORWARD = 2
INLINE = 16  # ids that travel with the command itself: a decode or verify pass's, in one collective
_HEADER = 3 + INLINE
_NO_CACHE = -1
INFO_BYTES = 256


class RankDiverged(RuntimeError):
    """A follower's cache holds fewer tokens than rank 0 says: the ranks are out of step."""


def _ints(array: mx.array) -> list[int]:
    """A 1-d integer array's values (`tolist` is typed for any shape)."""
    return [int(v) for v in cast("list[int]", array.tolist())]


class Channel:
    """Rank 0's commands to every rank, through `all_sum` over the group; timed."""

    def __init__(self, group: Any) -> None:
        self.group = group
        self.rank: int = group.rank()
        self.size: int = group.size()
        self.seconds = 0.0  # spent in this channel's collectives (the wait included)
        self.calls = 0

    def _sum(self, values: list[int], size: int) -> list[int]:
        mine = [0] * size
        if self.rank == 0:
            mine[: len(values)] = values
        start = time.perf_counter()
        out = mx.distributed.all_sum(mx.array(mine, dtype=mx.int32), group=self.group)
        mx.eval(out)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return _ints(out)

    def send(self, op: int, offset: int = 0, ids: list[int] | None = None) -> None:
        """Rank 0: share a command (the ids past INLINE go in a second collective)."""
        ids = ids or []
        self._sum([op, offset, len(ids), *ids[:INLINE]], _HEADER)
        if len(ids) > INLINE:
            self._sum(ids[INLINE:], len(ids) - INLINE)

    def receive(self) -> tuple[int, int, list[int]]:
        """A follower: the next command as (op, offset, ids)."""
        head = self._sum([], _HEADER)
        op, offset, n = head[0], head[1], head[2]
        ids = head[3 : 3 + min(n, INLINE)]
        if n > INLINE:
            ids += self._sum([], n - INLINE)
        return op, offset, ids

    def gather_text(self, text: str) -> list[str]:
        """Every rank's `text` (up to INFO_BYTES of UTF-8), in rank order, on every rank."""
        raw = text.encode()[:INFO_BYTES].ljust(INFO_BYTES, b"\0")
        mine = mx.array(list(raw), dtype=mx.uint8)
        out = mx.distributed.all_gather(mine, group=self.group)
        mx.eval(out)
        flat = bytes(_ints(out))
        return [
            flat[i * INFO_BYTES : (i + 1) * INFO_BYTES].rstrip(b"\0").decode(errors="replace")
            for i in range(self.size)
        ]


def _offset(cache: list[Any] | None) -> int:
    if not cache:
        return _NO_CACHE
    offset = getattr(cache[0], "offset", None)
    if not isinstance(offset, int):
        raise TypeError(f"a sharded main needs caches with an offset, not {type(cache[0]).__name__}")
    return offset


class ShardedMain:
    """Rank 0's main model: each call first tells the followers to run the same pass.

    Everything else (its layers, args, parameters) is the wrapped shard's, so `ChatSession`,
    the decode loop and mlx-lm's helpers use it as the model itself."""

    def __init__(self, model: Any, channel: Channel) -> None:
        self._model = model
        self._channel = channel
        # the last pass's output: its collectives must run before the next command's, in the
        # order the followers run them, even where rank 0 only read part of it (a cache state)
        self._last: mx.array | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    @property
    def channel(self) -> Channel:
        return self._channel

    def _flush(self) -> None:
        if self._last is not None:
            mx.async_eval(self._last)  # type: ignore[no-untyped-call]  # mlx declares no types here
            self._last = None

    def __call__(self, inputs: mx.array, cache: list[Any] | None = None, **kwargs: Any) -> mx.array:
        if inputs.ndim != 2 or inputs.shape[0] != 1:
            raise ValueError("a sharded main runs one sequence at a time")
        self._flush()
        # the followers need the ids themselves: a lazy input (a queued step's token) is read here
        ids = _ints(inputs.reshape(-1))
        self._channel.send(OP_FORWARD, _offset(cache), ids)
        out: mx.array = self._model(inputs, cache=cache, **kwargs)
        self._last = out
        return out

    def stop(self) -> None:
        """Let the followers leave their loop (after the last pass's collectives)."""
        self._flush()
        self._channel.send(OP_STOP)


@dataclass
class FollowerStats:
    passes: int = 0


def follow(model: Any, channel: Channel) -> FollowerStats:
    """A follower's whole life after loading: run rank 0's passes until it says stop."""
    cache = make_prompt_cache(model)
    stats = FollowerStats()
    while True:
        op, offset, ids = channel.receive()
        if op == OP_STOP:
            return stats
        if op != OP_FORWARD:
            raise RankDiverged(f"unknown command {op} from rank 0")
        inputs = mx.array(ids, dtype=mx.uint32)[None]
        if offset == _NO_CACHE:
            out = model(inputs)
        else:
            have = _offset(cache)
            if offset > have:
                raise RankDiverged(f"rank 0 feeds at {offset}, this rank's cache holds {have}")
            if offset < have:
                for layer in cache:
                    layer.trim(have - offset)
            out = model(inputs, cache=cache)
        mx.eval(out)
        stats.passes += 1
