"""The differential check behind the lossless tests: an answer against a fresh plain decode.

The reference is mlx-lm's own greedy loop over a cache made afresh for the whole conversation,
so a bug shared by SpecChat's plain and speculative paths cannot hide in it. Where the two
differ at a position whose top two logits are within `NEAR_TIE` the difference is arithmetic
(the same sums in another order), not a lost cache entry: it is reported, not failed.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache

from app.engine.decoding.loading import ModelPair

NEAR_TIE = 1e-4


def fresh_plain(pair: ModelPair, prompt: list[int], max_tokens: int) -> list[int]:
    """`max_tokens` greedy tokens after `prompt`, by mlx-lm over a new cache."""
    cache = make_prompt_cache(pair.main.model)
    steps = generate_step(
        mx.array(prompt, dtype=mx.uint32), pair.main.model, max_tokens=max_tokens, prompt_cache=cache
    )
    return [int(token) for token, _ in steps]


def top_two_gap(pair: ModelPair, ids: list[int]) -> float:
    """The main's margin between its two likeliest next tokens after `ids` (one pass, no cache)."""
    logits = pair.main.model(mx.array(ids, dtype=mx.uint32)[None])[0, -1].astype(mx.float32)
    top = mx.sort(logits)[-2:].tolist()
    return float(top[1] - top[0])


@dataclass
class Verdict:
    """`first_difference`: None where the answer is the reference's; `near_tie`: whether the
    main's top two logits there are within NEAR_TIE."""

    first_difference: int | None
    near_tie: bool = False
    gap: float = 0.0


def compare(pair: ModelPair, prompt: list[int], answer: list[int], reference: list[int]) -> Verdict:
    """Whether `answer` (which may have stopped early) is the start of `reference`."""
    for i, (got, want) in enumerate(zip(answer, reference)):
        if got != want:
            gap = top_two_gap(pair, prompt + reference[:i])
            return Verdict(i, gap < NEAR_TIE, gap)
    if len(answer) > len(reference):
        return Verdict(len(reference))
    return Verdict(None)
