"""Greedy plain and fixed-k speculative decoding for the sharding benchmark, with pass timings.

Every rank runs these loops identically: the main's all_sums are the only communication, and
every decision (greedy argmax, how many drafted tokens to accept) is the same on every rank
because every rank sees the same all-reduced logits.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, cast

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache


@dataclass
class PlainRun:
    tokens: list[int]
    margins: list[float]  # top-1 minus top-2 logit at each step: how near a tie the choice was
    seconds: float  # from the first decode step to the last


@dataclass
class SpecRun:
    k: int
    tokens: list[int]
    seconds: float
    rounds: int
    accepted: int  # drafted tokens the main kept
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    verify_passes: list[float] = field(default_factory=list)


def _ints(array: mx.array) -> list[int]:
    return cast("list[int]", array.tolist())


def _argmax(logits: mx.array) -> int:
    return _ints(mx.argmax(logits).reshape(1))[0]


def _prefill(model: Any, prompt: list[int]) -> tuple[list[Any], mx.array]:
    cache = make_prompt_cache(model)
    logits = model(mx.array([prompt]), cache=cache)[:, -1, :]
    mx.eval(logits)
    return cache, logits


def _margin(logits: mx.array) -> float:
    top2 = mx.topk(logits.astype(mx.float32).reshape(-1), 2)
    return cast(float, (mx.max(top2) - mx.min(top2)).item())


def plain_decode(main: Any, prompt: list[int], n_tokens: int) -> PlainRun:
    """The first token comes from the prompt pass; each further one costs one pass."""
    cache, logits = _prefill(main, prompt)
    tokens = [_argmax(logits)]
    margins = [_margin(logits)]
    start = time.perf_counter()
    while len(tokens) < n_tokens:
        logits = main(mx.array([[tokens[-1]]]), cache=cache)[:, -1, :]
        mx.eval(logits)
        tokens.append(_argmax(logits))
        margins.append(_margin(logits))
    return PlainRun(tokens=tokens, margins=margins, seconds=time.perf_counter() - start)


def speculative_decode(main: Any, draft: Any, prompt: list[int], n_tokens: int, k: int) -> SpecRun:
    """Draft k tokens greedily, verify them in one main pass of k+1, keep the agreeing prefix
    and the main's own next token. Greedy, so the output must equal plain decoding's."""
    main_cache, logits = _prefill(main, prompt)
    draft_cache, _ = _prefill(draft, prompt)
    tokens = [_argmax(logits)]
    draft_pending = [tokens[-1]]  # tokens the draft has not seen yet
    run = SpecRun(k=k, tokens=tokens, seconds=0.0, rounds=0, accepted=0)
    start = time.perf_counter()
    while len(tokens) < n_tokens:
        t0 = time.perf_counter()
        proposed: list[int] = []
        feed = draft_pending
        for _ in range(k):
            d_logits = draft(mx.array([feed]), cache=draft_cache)[:, -1, :]
            proposed.append(_argmax(d_logits))
            feed = proposed[-1:]
        t1 = time.perf_counter()
        v_logits = main(mx.array([[tokens[-1], *proposed]]), cache=main_cache)[0]
        targets = _ints(mx.argmax(v_logits, axis=-1))
        t2 = time.perf_counter()
        accepted = 0
        while accepted < k and proposed[accepted] == targets[accepted]:
            accepted += 1
        tokens.extend([*proposed[:accepted], targets[accepted]])
        # the main saw the last token and all k drafts; keep the last token and the accepted drafts
        trim_prompt_cache(main_cache, k - accepted)
        # the draft saw its pending tokens and the first k-1 drafts
        seen = len(draft_pending) + k - 1
        keep = len(draft_pending) + accepted
        if accepted == k:
            draft_pending = [proposed[-1], targets[accepted]]
        else:
            trim_prompt_cache(draft_cache, seen - keep)
            draft_pending = [targets[accepted]]
        run.rounds += 1
        run.accepted += accepted
        run.draft_seconds += t1 - t0
        run.verify_seconds += t2 - t1
        run.verify_passes.append(t2 - t1)
    run.seconds = time.perf_counter() - start
    run.tokens = tokens[:n_tokens]
    return run


def pass_ms(model: Any, prompt: list[int], n_inputs: int, repeats: int) -> float:
    """Median time of a main pass over `n_inputs` new tokens after the prompt (cache trimmed back)."""
    cache, _ = _prefill(model, prompt)
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        mx.eval(model(mx.array([prompt[:n_inputs]]), cache=cache))
        times.append(time.perf_counter() - start)
        trim_prompt_cache(cache, n_inputs)
    return statistics.median(times[1:]) * 1e3  # the first of each shape compiles kernels


def all_sum_ms(
    group: mx.distributed.Group,
    per_pass: int,
    shape: tuple[int, ...],
    dtype: mx.Dtype,
    repeats: int,
    warmup: int = 1,
) -> float:
    """Median time of `per_pass` chained all_sums of a pass's hidden states, nothing else; the
    first `warmup` runs are left out."""
    x = mx.ones(shape, dtype=dtype)
    mx.eval(x)
    times = []
    scale = 1.0 / group.size()
    for _ in range(repeats + warmup):
        y = x
        start = time.perf_counter()
        for _ in range(per_pass):
            # scaling keeps the values bounded; each sum depends on the last, as in a forward
            y = mx.distributed.all_sum(y, group=group) * scale
        mx.eval(y)
        times.append(time.perf_counter() - start)
    return statistics.median(times[warmup:]) * 1e3


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token, or None when the shorter is a prefix of the longer."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None
