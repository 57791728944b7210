"""A round's passes taken apart, with the session and step code the decode loop uses.

The draft phase of a fixed-k round is k single-token steps (the first also reads the draft's
backlog), each built on the host as a lazy graph, run by the backend, sampled, and chained to
the next with `mx.async_eval`, then read once (`drafting.propose`). Timing each piece on its
own says which one a draft token's cost is made of: building the graph, waiting on the device
step by step, the catch-up read, sampling, or the kernels themselves. The main's verify pass is
timed at every size a round plays against its plain step. Every timing leaves the session's
caches as it found them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from app.engine.decoding.sampling import Sampler, SamplingParams
from app.engine.decoding.session import ChatSession
from app.engine.decoding.shapes import buckets
from app.engine.decoding.shapes.buckets import STEP_SIZES
from lab.gpu.floors import Floors, median_seconds
from lab.gpu.passes_alone import draft_seconds, trim_back, verify_seconds

SAMPLED = SamplingParams(temperature=0.7, top_p=0.9, seed=0)  # a chat's sampling, for its cost


@dataclass(frozen=True)
class Row:
    """One line of a table: what was timed, its median seconds, and per how many tokens."""

    label: str
    seconds: float
    tokens: int = 1  # a row of k steps is also shown per token


def _step(session: ChatSession, sampler: Sampler, y: mx.array, history: mx.array) -> mx.array:
    """One draft step's lazy graph as `propose` builds it: the pass (in the session's pass
    sizes), the last row processed, a token drawn."""
    draft = session.pair.draft
    assert draft is not None and session.draft_cache is not None
    # the session's compiled step where it has one, as `propose` passes it
    step = getattr(session, "draft_step", None)
    compiled: dict[str, Any] = {"step": step} if step is not None else {}
    out = buckets.run(draft.model, session.draft_cache, y, session.bucketed, **compiled)
    return sampler.draw(sampler.process(out[:, -1, :], history if sampler.uses_history else None))


def _pending(session: ChatSession) -> mx.array:
    assert session.pending is not None
    return mx.array([session.pending], dtype=mx.uint32)


def build_and_run(session: ChatSession, sampler: Sampler, trials: int) -> tuple[float, float]:
    """Median seconds to build one single-token step's graph on the host, and to evaluate that
    graph once built (the kernels, and on a GPU their launches)."""
    assert session.draft_cache is not None and session.pending is not None
    history = sampler.history_window(session.tokens, session.pending)
    built: list[float] = []
    ran: list[float] = []
    for _ in range(trials + 1):
        y = _pending(session)
        mx.eval(y)
        start = time.perf_counter()
        token = _step(session, sampler, y, history)
        middle = time.perf_counter()
        mx.eval(token)
        end = time.perf_counter()
        trim_back(session.draft_cache, 1)
        built.append(middle - start)
        ran.append(end - middle)
    return statistics.median(built[1:]), statistics.median(ran[1:])


def k_steps(session: ChatSession, sampler: Sampler, k: int, trials: int, each: bool) -> float:
    """Median seconds of k draft steps, each read back before the next is built (`each`), or all
    built lazily and read once at the end with no `async_eval` between them."""
    assert session.draft_cache is not None and session.pending is not None
    cache = session.draft_cache
    history = sampler.history_window(session.tokens, session.pending)

    def once() -> float:
        start = time.perf_counter()
        y, ids = _pending(session), []
        for _ in range(k):
            y = _step(session, sampler, y, history)
            if each:
                mx.eval(y)
            ids.append(y)
        mx.eval(ids)
        took = time.perf_counter() - start
        trim_back(cache, k)
        return took

    return median_seconds(once, trials)


def sampling_seconds(session: ChatSession, trials: int) -> list[Row]:
    """The sampler's process and draw on one row of the draft's logits, greedy and sampled,
    against a bare argmax, each evaluated alone."""
    draft = session.pair.draft
    assert draft is not None and session.draft_cache is not None
    logits = draft.model(_pending(session)[None], cache=session.draft_cache)[:, -1, :]
    mx.eval(logits)
    trim_back(session.draft_cache, 1)

    def timed(make: Callable[[], mx.array]) -> float:
        def once() -> float:
            start = time.perf_counter()
            mx.eval(make())
            return time.perf_counter() - start

        return median_seconds(once, trials)

    def sample(sampler: Sampler) -> Callable[[], mx.array]:
        return lambda: sampler.draw(sampler.process(logits, None))

    rows = [
        Row(f"sampler process + draw ({name})", timed(sample(Sampler(params))))
        for name, params in (("greedy", SamplingParams()), ("t 0.7, top-p 0.9", SAMPLED))
    ]
    rows.append(Row("bare argmax", timed(lambda: mx.argmax(logits, axis=-1))))
    return rows


def draft_split(session: ChatSession, k: int, trials: int, floors: Floors) -> list[Row]:
    """The draft phase of a greedy k-round taken apart (seconds, medians of `trials`)."""
    sampler = Sampler(SamplingParams())
    built, ran = build_and_run(session, sampler, trials)
    return [
        Row("build one step's graph (host)", built),
        Row("evaluate a built step (kernels, launches)", ran),
        Row("one step, built and evaluated", draft_seconds(session, sampler, 1, 0, trials)),
        Row(f"{k} steps, each evaluated before the next", k_steps(session, sampler, k, trials, True), k),
        Row(f"{k} steps built lazily, one eval at the end", k_steps(session, sampler, k, trials, False), k),
        Row(
            f"{k} steps chained by async_eval (the loop's)", draft_seconds(session, sampler, k, 0, trials), k
        ),
        Row("first step with 1 token of backlog (2 tokens)", draft_seconds(session, sampler, 1, 1, trials)),
        Row(
            f"{k} steps, the first with 1 token of backlog", draft_seconds(session, sampler, k, 1, trials), k
        ),
        *sampling_seconds(session, trials),
        Row("floor: compiled 1-token forward, no cache", floors.compiled_step),
        Row("floor: weight bytes / memory bandwidth", floors.streaming),
    ]


def verify_split(session: ChatSession, trials: int, floors: Floors) -> list[Row]:
    """The main's verify pass at every size a round plays (1 is a plain step), greedy."""
    sampler = Sampler(SamplingParams())
    rows = [
        Row(f"verify pass over {n} token{'s' * (n > 1)}", verify_seconds(session, sampler, n, trials))
        for n in STEP_SIZES
    ]
    return [
        *rows,
        Row("floor: compiled 1-token forward, no cache", floors.compiled_step),
        Row("floor: weight bytes / memory bandwidth", floors.streaming),
    ]
