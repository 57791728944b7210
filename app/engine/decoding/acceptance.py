"""Acceptance rules: which proposed tokens the main keeps, and the token it adds after them.

A rule sees the main's processed scores `p` for every fed row (k + 1 rows), the proposals'
scores `q` (k rows; a lookup proposal is a point mass) and the proposed ids, and returns two lazy
arrays: `accept` (k,) and `draws` (k + 1,), where draws[i] is the main's token if the first
rejection is at i (draws[k] is the bonus token). Everything stays on the device, so the loop
still synchronises once per verify pass.

* exact: the main draws its own token at every row; a proposal stands if it is that token.
  Lossless, and the only rule that makes sense greedily.
* residual (Leviathan et al. 2023): accept x with probability min(1, p(x) / q(x)); on rejection
  draw from normalize(max(0, p − q)); the bonus from p. The output is distributed exactly as
  plain sampling from p, and acceptance is higher than exact matching whenever p is not peaked.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import mlx.core as mx

from app.engine.decoding.sampling import Sampler


class AcceptanceRule(enum.StrEnum):
    """The rules by name, as settings and the benchmark spell them."""

    EXACT = "exact"
    RESIDUAL = "residual"


Rule = Callable[[mx.array, mx.array, mx.array, Sampler], tuple[mx.array, mx.array]]


def exact(p: mx.array, q: mx.array, proposed: mx.array, sampler: Sampler) -> tuple[mx.array, mx.array]:
    draws = sampler.draw(p)
    return draws[: proposed.size] == proposed, draws


def residual(p: mx.array, q: mx.array, proposed: mx.array, sampler: Sampler) -> tuple[mx.array, mx.array]:
    k = proposed.size
    if sampler.params.greedy or k == 0:
        return exact(p, q, proposed, sampler)
    at = proposed.astype(mx.int32)[:, None]
    log_ratio = (mx.take_along_axis(p[:k], at, axis=-1) - mx.take_along_axis(q, at, axis=-1))[:, 0]
    uniform_key, draw_key = mx.random.split(sampler.next_key())
    accept = mx.log(mx.random.uniform(shape=(k,), key=uniform_key)) < log_ratio
    left = mx.maximum(mx.exp(p[:k]) - mx.exp(q), 0.0)
    # p == q to the last bit leaves nothing: rejection then has probability 0, any row will do
    rows = mx.where(left.sum(axis=-1, keepdims=True) > 0, mx.log(left), p[:k])
    rows = mx.concatenate([rows, p[k:]], axis=0)
    draws = mx.random.categorical(rows, axis=-1, key=draw_key).astype(mx.uint32)
    return accept, draws


def point_mass(ids: mx.array, vocab: int) -> mx.array:
    """Log-probabilities (k, V) of proposals that were certain (prompt lookup)."""
    hit = mx.arange(vocab)[None, :] == ids.astype(mx.int32)[:, None]
    return mx.where(hit, 0.0, -mx.inf)


RULES: dict[str, Rule] = {AcceptanceRule.EXACT: exact, AcceptanceRule.RESIDUAL: residual}


def resolve(name: str | None, sampler: Sampler) -> AcceptanceRule:
    """The rule to use: residual by default when sampling, exact when greedy."""
    if name is None:
        return AcceptanceRule.EXACT if sampler.params.greedy else AcceptanceRule.RESIDUAL
    if name not in RULES:
        raise ValueError(f"unknown acceptance rule {name!r}; choose from {', '.join(RULES)}")
    return AcceptanceRule(name)
