"""How often a draft's proposals would be accepted when sampling, computed instead of sampled.

At one position the chance that a draft proposal x ~ q stands is Σ_x p(x)·q(x) under exact
matching (the main's own draw, independent of the draft's, must be x) and Σ_x min(p(x), q(x))
under residual sampling. A sampled benchmark of the real pair estimates these from a few hundred
coin flips (tens of minutes on a CPU); here both are read off the two models' distributions
at every position of a continuation sampled from the main (the text both rules produce is
distributed as the main's own sampling), so the only noise left is which continuation was drawn.

Expected tokens accepted per round at draft length k, from a start t, are
Σ_{j=1..k} Π_{i<j} a(t + i): a run of acceptances along the path (positions taken as
independent, as in Leviathan et al.'s analysis).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

import mlx.core as mx

from app.engine.decoding.loading import LoadedModel
from app.engine.decoding.sampling import Sampler


@dataclass(frozen=True, slots=True)
class Agreement:
    """Per position of one continuation: the chance a draft proposal stands under each rule."""

    exact: tuple[float, ...]
    residual: tuple[float, ...]

    def round_totals(self, rule: str, k: int) -> tuple[float, int]:
        """Expected proposals accepted summed over every start with k positions after it, and
        how many such starts there are."""
        rates = self.rates(rule)
        starts = max(0, len(rates) - k + 1) if k >= 1 else 0
        total = 0.0
        for t in range(starts):
            run = 1.0
            for i in range(k):
                run *= rates[t + i]
                total += run
        return total, starts

    def rates(self, rule: str) -> tuple[float, ...]:
        if rule not in ("exact", "residual"):
            raise ValueError(f"unknown acceptance rule {rule!r}; choose exact or residual")
        return self.exact if rule == "exact" else self.residual


def _processed_rows(model: LoadedModel, sampler: Sampler, ids: list[int], first: int) -> mx.array:
    """The model's processed scores (log-probabilities) for predicting ids[first:], in one pass
    over the whole sequence, each row processed against the history it would have had."""
    logits = model.model(mx.array(ids, dtype=mx.uint32)[None])[0, first - 1 : len(ids) - 1]
    if not sampler.uses_history:
        return sampler.process(logits, None)
    window = sampler.params.repetition_context
    rows = []
    for row, end in enumerate(range(first, len(ids))):
        history = mx.array(ids[max(0, end - window) : end], dtype=mx.uint32)
        rows.append(sampler.process(logits[row : row + 1], history))
    return mx.concatenate(rows, axis=0)


def agreement(
    main: LoadedModel, draft: LoadedModel, sampler: Sampler, context: list[int], continuation: list[int]
) -> Agreement:
    """Both rules' acceptance chance at every position of `continuation` after `context`.

    The sampler's processing (temperature, top-k/p, min-p, penalties) is applied to both models,
    as the decode loop does; greedy has no distributions to compare."""
    if sampler.params.greedy:
        raise ValueError("agreement compares sampling distributions: use a temperature above 0")
    if not context or not continuation:
        raise ValueError("agreement needs a non-empty context and continuation")
    ids = list(context) + list(continuation)
    p = _processed_rows(main, sampler, ids, len(context))
    q = _processed_rows(draft, sampler, ids, len(context))
    vocab = min(p.shape[-1], q.shape[-1])  # padded embedding rows are never sampled
    p, q = mx.exp(p[:, :vocab]), mx.exp(q[:, :vocab])
    exact = (p * q).sum(axis=-1)
    residual = mx.minimum(p, q).sum(axis=-1)
    mx.eval(exact, residual)
    # one chance per position: a 1-D array's list
    return Agreement(tuple(cast(list[float], exact.tolist())), tuple(cast(list[float], residual.tolist())))


def per_token(parts: Iterable[Agreement], rule: str) -> float:
    """The chance a proposal stands, over every position of every continuation."""
    rates = [a for part in parts for a in part.rates(rule)]
    return sum(rates) / len(rates) if rates else 0.0


def accepted_per_round(parts: Iterable[Agreement], rule: str, k: int) -> float:
    """Expected proposals accepted in a round of draft length k, over every start of every
    continuation that has k positions after it (runs never cross from one to the next)."""
    totals = [part.round_totals(rule, k) for part in parts]
    starts = sum(n for _, n in totals)
    return sum(t for t, _ in totals) / starts if starts else 0.0
