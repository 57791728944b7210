"""Logit processing and token drawing shared by the draft and the main model.

Speculation is only lossless when the draft's proposals and the main's verification see exactly
the same processing (penalty history included), so one `Sampler` serves both passes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """What the user chose; temperature 0 means greedy."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    repetition_context: int = 64
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be ≥ 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be ≥ 0, got {self.top_k}")
        if not 0 <= self.min_p < 1:
            raise ValueError(f"min_p must be in [0, 1), got {self.min_p}")
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        if self.repetition_context < 1:
            raise ValueError(f"repetition_context must be ≥ 1, got {self.repetition_context}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


class Sampler:
    """Processes logits against a token history and draws tokens from a seeded key chain."""

    def __init__(self, params: SamplingParams) -> None:
        self.params = params
        seed = params.seed if params.seed is not None else random.getrandbits(63)
        self._key = mx.random.key(seed)

    @property
    def uses_history(self) -> bool:
        return self.params.repetition_penalty != 1.0

    def history_window(self, tokens: list[int], pending: int) -> mx.array:
        """The slice of history the penalty looks at, as an array the passes can extend lazily."""
        if not self.uses_history:
            return mx.array([], dtype=mx.uint32)
        recent = tokens[-self.params.repetition_context :] + [pending]
        return mx.array(recent[-self.params.repetition_context :], dtype=mx.uint32)

    def _penalize(self, logits: mx.array, history: mx.array) -> mx.array:
        """Sign-aware multiplicative penalty on tokens seen in `history` (one row of logits)."""
        if history.size == 0:
            return logits
        recent = history[-self.params.repetition_context :]
        seen = logits[:, recent]
        penalty = self.params.repetition_penalty
        seen = mx.where(seen < 0, seen * penalty, seen / penalty)
        logits = mx.array(logits)
        logits[:, recent] = seen
        return logits

    def process(self, logits: mx.array, history: mx.array | None) -> mx.array:
        """Logits (1, V) -> processed scores (1, V).

        Greedy: penalized logits (argmax is all that is needed; unpenalized, in the model's own
        dtype). Otherwise normalized log-probabilities after temperature, top-k, top-p and
        min-p, so that residual acceptance can compare draft and main distributions directly.
        """
        p = self.params
        if p.greedy and not (self.uses_history and history is not None):
            return logits  # the argmax of half-precision logits is the argmax of their float32 cast
        logits = logits.astype(mx.float32)
        if self.uses_history and history is not None:
            logits = self._penalize(logits, history)
        if p.greedy:
            return logits
        logprobs = logits / p.temperature
        logprobs = logprobs - mx.logsumexp(logprobs, axis=-1, keepdims=True)
        if 0 < p.top_k < logprobs.shape[-1]:
            logprobs = apply_top_k(logprobs, p.top_k)
        if p.top_p < 1.0:
            logprobs = apply_top_p(logprobs, p.top_p)
        if p.min_p > 0:
            logprobs = apply_min_p(logprobs, p.min_p)
        return logprobs - mx.logsumexp(logprobs, axis=-1, keepdims=True)

    def next_key(self) -> mx.array:
        """A fresh key from the seeded chain (draws and acceptance tests share one chain)."""
        self._key, sub = mx.random.split(self._key)
        return sub

    def draw(self, scores: mx.array) -> mx.array:
        """Scores (n, V) -> token ids (n,), lazily."""
        if self.params.greedy:
            return mx.argmax(scores, axis=-1).astype(mx.uint32)
        return mx.random.categorical(scores, axis=-1, key=self.next_key()).astype(mx.uint32)
