"""Recording what replay needs from a real pair: the main's greedy answer with the draft's
verdict on every token, and this machine's costs for the pair's passes. Kept apart from replay,
which is plain Python and runs without the models."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, cast

from app.engine.decoding.events import RoundEvent
from app.engine.decoding.policy import MAX_DRAFT
from app.engine.policy.oracle import cost_curve, fit_line
from lab.replay.simulate import CostModel, Trace

if TYPE_CHECKING:
    from app.engine.decoding.loading import ModelPair


def record_trace(pair: ModelPair, prompt: list[int], max_tokens: int, label: str = "") -> Trace:
    """The main's greedy answer to `prompt`, and the draft's verdict on each token from one
    teacher-forced pass over prompt and answer."""
    import mlx.core as mx

    from app.engine.decoding.decode import generate
    from app.engine.decoding.events import GenerationFinished
    from app.engine.decoding.policy import PlainDecoding
    from app.engine.decoding.session import ChatSession

    answer: tuple[int, ...] = ()
    for event in generate(ChatSession(pair), prompt, policy=PlainDecoding(), max_tokens=max_tokens):
        if isinstance(event, GenerationFinished):
            answer = event.token_ids
    if not answer:
        return Trace(tuple(prompt), (), (), label)
    assert pair.draft is not None
    logits = pair.draft.model(mx.array(list(prompt) + list(answer[:-1]), dtype=mx.uint32)[None])[0]
    picks = cast(list[int], mx.argmax(logits[len(prompt) - 1 :], axis=-1).tolist())  # a 1-D array's list
    return Trace(tuple(prompt), answer, tuple(a == b for a, b in zip(picks, answer)), label)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def measure_costs(
    pair: ModelPair, context: list[int], ks: tuple[int, ...] = (1, 2, 4, 8), tokens: int = 32
) -> CostModel:
    """This machine's costs for `pair`, from the decode loop's own rounds after `context`: plain
    decoding and each fixed k in `ks` answer it, and every round reports its verify pass, its
    drafting, and (from the wall clock between rounds) what the loop spends besides. Timing
    bare forward passes instead prices speculation far too cheap against `bench`: a round also
    pays sampling over k + 1 rows, host syncs and bookkeeping. Reading skipped tokens is timed on bare draft passes."""
    from app.engine.decoding.decode import generate
    from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
    from app.engine.decoding.session import ChatSession

    verify: dict[int, list[float]] = {}
    drafting: dict[int, list[float]] = {}
    overhead: list[float] = []
    for k in (0, *ks):
        policy = FixedDraftLength(k) if k else PlainDecoding()
        last = None
        for event in generate(ChatSession(pair), context, policy=policy, max_tokens=tokens):
            if not isinstance(event, RoundEvent):
                continue
            now = time.perf_counter()
            if last is not None:  # the first round pays for warming up
                verify.setdefault(event.k + 1, []).append(event.verify_seconds)
                overhead.append(max(0.0, now - last - event.draft_seconds - event.verify_seconds))
                if event.k and event.catch_up <= 1:
                    drafting.setdefault(event.k, []).append(event.draft_seconds)
            last = now
    sizes = {n: _median(v) for n, v in verify.items()}
    # the measured sizes, and a fitted line between and beyond them
    table = cost_curve(sizes, fit_line([(n, v, 1.0) for n, v in sizes.items()]), MAX_DRAFT + 1)
    fixed, step = fit_line([(k, _median(v), 1.0) for k, v in drafting.items()]) if drafting else (0.0, 0.0)
    reads = _catch_up_reads(pair, context)
    return CostModel(tuple(table), step, max(fixed, 0.0), reads, _median(overhead), 0.0, "measured")


def _catch_up_reads(pair: ModelPair, context: list[int], lag: int = 16) -> float:
    """Seconds per skipped token the draft reads in its first step: a round after `lag` plain
    steps against one right after another draft round."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    assert pair.draft is not None
    draft = pair.draft.model
    cache = make_prompt_cache(draft)
    mx.eval(draft(mx.array(context, dtype=mx.uint32)[None], cache=cache))
    times: dict[int, list[float]] = {1: [], lag + 1: []}
    for _ in range(5):
        for n in times:
            t0 = time.perf_counter()
            mx.eval(mx.argmax(draft(mx.zeros((1, n), dtype=mx.uint32), cache=cache)[:, -1, :], axis=-1))
            times[n].append(time.perf_counter() - t0)
            for c in cache:
                c.trim(n)
    return max((_median(times[lag + 1]) - _median(times[1])) / lag, 0.0)
