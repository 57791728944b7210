"""The oracle: the best fixed draft length for a run, in hindsight.

From every measured round of a prompt (any mode): acceptance by draft position (conditioned on
the previous one being accepted), the cost of drafting k tokens, of a verify pass over n tokens,
and the per-round overhead (each cost per size where measured, fitted by a line elsewhere). It
predicts each fixed k's speed relative to plain decoding and picks the best, so the adaptive
policy can be scored against what was achievable without hindsight.

It is runtime code: the arena and the dashboard's telemetry report it, and the benchmark
(measure/) scores against it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from app.engine.decoding.events import RoundEvent
from app.engine.policy.costs import cost_curve, fit_line
from app.engine.policy.estimates import expected_tokens


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """One measured round, as the benchmark, the arena and telemetry keep it."""

    k: int
    accepted: int
    draft_seconds: float
    verify_seconds: float
    wall_seconds: float  # from the previous round's event to this one's
    source: str
    catch_up: int
    why: str = ""  # the policy's reason for this round's k (adaptive: model, probe, explore, ...)
    expected_speedup: float = 0.0  # what the policy predicted for its best plan, against plain
    # what it predicted for the draft model at k = 1, 2, ... (why a k was not chosen)
    draft_speedup_by_k: tuple[float, ...] = ()
    overlapped: bool = False  # a queued plain step: its wall time is a plain token's real cost
    # the draft's acceptance estimates by position behind that prediction (prices or text?)
    draft_acceptance: tuple[float, ...] = ()

    @classmethod
    def of(cls, event: RoundEvent, wall: float) -> RoundRecord:
        """The round as the oracle reads it; the policy's figures are kept as it gave them (rounded
        when written), since this runs between rounds, inside the timed answer."""
        policy = event.policy
        why, expected = policy.get("why", ""), policy.get("expected_speedup", 0.0)
        by_source = policy.get("speedup_by_k", {})
        draft = by_source.get("draft", ()) if isinstance(by_source, dict) else ()
        rates = policy.get("acceptance", {})
        accepting = rates.get("draft", ()) if isinstance(rates, dict) else ()
        return cls(
            event.k,
            event.accepted,
            event.draft_seconds,
            event.verify_seconds,
            wall,
            event.source.value,
            event.catch_up,
            why if isinstance(why, str) else "",
            float(expected) if isinstance(expected, int | float) else 0.0,
            tuple(draft),
            event.overlapped,
            tuple(accepting),
        )


@dataclass(frozen=True, slots=True)
class Oracle:
    best_k: int
    predicted_speedup: float  # best fixed k over plain, predicted from the measurements
    acceptance: tuple[float, ...]
    speedup_by_k: tuple[float, ...]  # k = 1, 2, ...


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _costs(by_n: dict[int, list[float]], up_to: int) -> list[float]:
    """Mean cost per measured n; a least-squares line elsewhere (proportional to n while only
    one size is measured); non-decreasing."""
    measured = {n: _mean(v) for n, v in by_n.items()}
    line = fit_line([(n, measured[n], len(v)) for n, v in by_n.items()])
    return cost_curve(measured, line, up_to)


def best_fixed(rounds: Iterable[RoundRecord], max_k: int = 8) -> Oracle | None:
    """None when the rounds cannot tell (no draft-model rounds, or no plain step measured, alone or queued)."""
    hits, trials = [0] * max_k, [0] * max_k
    drafting: dict[int, list[float]] = defaultdict(list)
    verify: dict[int, list[float]] = defaultdict(list)
    overhead: list[float] = []
    queued: list[float] = []  # per token, plain steps queued under the round before
    for r in rounds:
        if r.overlapped:
            if r.wall_seconds > 0:
                queued.append(r.wall_seconds)
            continue
        verify[r.k + 1].append(r.verify_seconds)
        if r.wall_seconds > 0:
            overhead.append(max(0.0, r.wall_seconds - r.draft_seconds - r.verify_seconds))
        if r.k and r.source == "draft":
            for i in range(min(r.accepted + 1, r.k, max_k)):
                trials[i] += 1
                hits[i] += i < r.accepted
            if r.catch_up <= 1:
                drafting[r.k].append(r.draft_seconds)
    if not trials[0] or (1 not in verify and not queued) or not drafting:
        return None
    rates, prev = [], 0.0
    for h, t in zip(hits, trials):
        prev = h / t if t else prev
        rates.append(prev)
    costs = _costs(verify, max_k + 1)
    draft = _costs(drafting, max_k)
    o = _mean(overhead)
    # plain decoding as it runs (its steps queued, the loop's Python hidden) where it was seen;
    # a one-at-a-time plain round otherwise
    plain = 1.0 / _mean(queued) if queued else 1.0 / (o + costs[0])
    observed = max(i + 1 for i in range(max_k) if trials[i])  # no extrapolating acceptance
    speedups = tuple(
        expected_tokens(rates[:k]) / (o + draft[k - 1] + costs[k]) / plain for k in range(1, observed + 1)
    )
    best = max(range(observed), key=lambda i: speedups[i])
    return Oracle(best + 1, speedups[best], tuple(rates), speedups)
