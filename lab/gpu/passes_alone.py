"""A round's two passes timed on their own, outside the decode loop, with the loop's own code.

A round's wall time is its passes plus whatever the loop does between them; timing the passes
alone at the round's sizes (the draft's k and catch-up, the main's k + 1 tokens) and comparing
says how much of a round is the loop's. Each timing leaves the session's caches as it found
them: what a pass fed is trimmed back off.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import mlx.core as mx

from app.engine.decoding import acceptance as rules
from app.engine.decoding.decode import _judge  # the loop's own verify pass, not a copy of it
from app.engine.decoding.drafting import Proposal, propose
from app.engine.decoding.loading import ModelPair
from app.engine.decoding.sampling import Sampler, SamplingParams
from app.engine.decoding.session import ChatSession
from app.engine.policy.oracle import RoundRecord
from lab.gpu.floors import median_seconds


def ready_session(pair: ModelPair, prompt: list[int]) -> ChatSession:
    """A session of the kind the app makes, holding `prompt` in both caches, its last token
    pending: where the first round of an answer starts."""
    session = ChatSession(pair)
    for _ in session.prefill(prompt, None, with_draft=pair.draft is not None):
        pass
    return session


def trim_back(cache: list[object], n: int) -> None:
    """Take the last `n` entries a timed pass fed back off every layer."""
    if n:
        for layer in cache:
            layer.trim(n)  # type: ignore[attr-defined]  # every cache layer the session makes trims


def draft_seconds(session: ChatSession, sampler: Sampler, k: int, lag: int, trials: int) -> float:
    """Median seconds of the draft proposing k tokens with `lag` tokens to catch up on first
    (read with the pending one in its first step), evaluated as the loop evaluates them."""
    cache, base = session.draft_cache, session.draft_len
    assert cache is not None and session.pending is not None and 0 <= lag <= base
    history = sampler.history_window(session.tokens, session.pending)

    def once() -> float:
        trim_back(cache, lag)  # the draft reads the last `lag` tokens again: the same entries back
        session.draft_len = base - lag
        start = time.perf_counter()
        proposal = propose(session, sampler, k, history)
        mx.eval(proposal.ids)
        took = time.perf_counter() - start
        trim_back(cache, k)  # pending and k - 1 proposals past `base`
        session.draft_len = base
        return took

    return median_seconds(once, trials)


def verify_seconds(session: ChatSession, sampler: Sampler, n: int, trials: int) -> float:
    """Median seconds of the main's pass over n tokens (pending and n - 1 proposals) with the
    acceptance verdict, as the loop builds and reads it; n = 1 is a plain step."""
    assert session.pending is not None
    pending = mx.array([session.pending], dtype=mx.uint32)
    history = sampler.history_window(session.tokens, session.pending)
    # what the proposals are changes nothing a pass costs
    proposed = mx.array([session.pending] * (n - 1), dtype=mx.uint32)
    proposal = Proposal(proposed, None, None) if n > 1 else None

    def once() -> float:
        start = time.perf_counter()
        verdict = _judge(session, sampler, rules.exact, pending, proposal, history)
        mx.eval(*verdict.arrays())
        took = time.perf_counter() - start
        trim_back(session.main_cache, n)
        return took

    return median_seconds(once, trials)


@dataclass
class PassesAlone:
    """Passes timed alone: the draft by (k, catch-up), the main by tokens fed."""

    draft: dict[tuple[int, int], float] = field(default_factory=dict)
    verify: dict[int, float] = field(default_factory=dict)

    def round_seconds(self, r: RoundRecord) -> float:
        """A round's draft and verify passes, each as it costs alone."""
        drafted = self.draft[(r.k, r.catch_up)] if r.k else 0.0
        return drafted + self.verify[r.k + 1]


def draft_rounds(records: Iterable[RoundRecord]) -> list[RoundRecord]:
    """The rounds whose wall time tells a round's cost: the draft model's, after an answer's
    first (whose wall time also holds the prompt's reading)."""
    return [r for r in records if r.k and r.source == "draft" and r.wall_seconds > 0]


def time_passes_alone(
    session: ChatSession, rounds: Sequence[RoundRecord], trials: int, sampling: SamplingParams | None = None
) -> PassesAlone:
    """Every pass size `rounds` played, timed alone in `session`, and the plain step."""
    sampler = Sampler(sampling or SamplingParams())
    alone = PassesAlone()
    for k, lag in sorted({(r.k, r.catch_up) for r in rounds if r.k}):
        alone.draft[(k, lag)] = draft_seconds(session, sampler, k, lag, trials)
    for n in sorted({1} | {r.k + 1 for r in rounds}):
        alone.verify[n] = verify_seconds(session, sampler, n, trials)
    return alone


def wall_over_alone(rounds: Sequence[RoundRecord], alone: PassesAlone) -> float:
    """The rounds' wall time over the sum of their passes timed alone (1.0: the loop adds
    nothing to its passes)."""
    passes = sum(alone.round_seconds(r) for r in rounds)
    return sum(r.wall_seconds for r in rounds) / passes if passes > 0 else 0.0
