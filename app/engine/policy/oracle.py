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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.engine.decoding.events import RoundEvent


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
        decision = event.decision
        return cls(
            event.k,
            event.accepted,
            event.draft_seconds,
            event.verify_seconds,
            wall,
            event.source.value,
            event.catch_up,
            decision.reason.value,
            decision.expected_speedup,
            decision.speedup_by_k,
            event.overlapped,
            decision.acceptance,
        )


@dataclass(frozen=True, slots=True)
class Oracle:
    best_k: int
    predicted_speedup: float  # best fixed k over plain, predicted from the measurements
    acceptance: tuple[float, ...]
    speedup_by_k: tuple[float, ...]  # k = 1, 2, ...


def expected_tokens(rates: Sequence[float]) -> float:
    """Expected tokens of a round drafting len(rates) tokens: the main's own token plus the
    expected run of accepted proposals (rates[i]: proposal i accepted given 0..i-1 were)."""
    tokens, run = 1.0, 1.0
    for a in rates:
        run *= a
        tokens += run
    return tokens


def fit_line(points: Sequence[tuple[int, float, float]]) -> tuple[float, float]:
    """(intercept, slope >= 0) of the weighted least-squares line through (n, cost, weight);
    proportional to n while only one size is measured. One pass: the controller fits every round."""
    w = sum_n = sum_v = sum_nn = sum_nv = 0.0
    for n, v, c in points:
        cn = c * n
        w += c
        sum_n += cn
        sum_v += c * v
        sum_nn += cn * n
        sum_nv += cn * v
    if w <= 0:
        return 0.0, 0.0
    mean_n, mean_v = sum_n / w, sum_v / w
    var = sum_nn - sum_n * mean_n  # the weighted sum of (n - mean_n)**2
    if var <= 1e-9 * sum_nn:  # one size: proportional to n
        return 0.0, mean_v / mean_n if mean_n else 0.0
    slope = max(0.0, (sum_nv - sum_n * mean_v) / var)
    return mean_v - slope * mean_n, slope


def cost_curve(measured: dict[int, float], line: tuple[float, float], up_to: int) -> list[float]:
    """Cost for n = 1..up_to: the measurement where there is one, the line elsewhere, made
    non-decreasing by lowering a dear smaller size to the larger ones (never raising them), the
    first size kept: a price too high is never played, so nothing would correct it."""
    base, slope = line
    prices = [measured.get(n, base + slope * n) for n in range(1, up_to + 1)]
    out, ceiling = list(prices), float("inf")
    for n in range(len(prices) - 1, -1, -1):
        ceiling = min(ceiling, prices[n])
        out[n] = ceiling
    if out:
        out[0] = prices[0]
        out[1:] = [max(x, out[0]) for x in out[1:]]
    return out


def leviathan_rate(
    rates: Sequence[float], draft_seconds: float, verify_seconds: float, overhead: float = 0.0
) -> float:
    """Tokens per second of rounds drafting len(rates) tokens (Leviathan et al. 2023, with
    acceptance by position): the tokens a round is expected to give over what it costs."""
    return expected_tokens(list(rates)) / (overhead + draft_seconds + verify_seconds)


class _Mean:
    """A running mean: the tally keeps sums, not every sample."""

    __slots__ = ("n", "total")

    def __init__(self) -> None:
        self.total, self.n = 0.0, 0

    def add(self, x: float) -> None:
        self.total += x
        self.n += 1

    @property
    def value(self) -> float:
        return self.total / self.n if self.n else 0.0


def _costs(by_n: dict[int, _Mean], up_to: int) -> list[float]:
    """Mean cost per measured n; a least-squares line elsewhere (proportional to n while only
    one size is measured); non-decreasing."""
    measured = {n: m.value for n, m in by_n.items()}
    line = fit_line([(n, measured[n], m.n) for n, m in by_n.items()])
    return cost_curve(measured, line, up_to)


class Tally:
    """What the oracle reads from rounds, kept as sums: a round is added once, and asking again
    after more rounds costs the same however long the answer (the dashboard asks every batch)."""

    def __init__(self, max_k: int = 8) -> None:
        self.max_k = max_k
        self.hits, self.trials = [0] * max_k, [0] * max_k
        self.drafting: dict[int, _Mean] = {}
        self.verify: dict[int, _Mean] = {}
        self.overhead = _Mean()
        self.queued = _Mean()  # per token, plain steps queued under the round before

    def add(self, r: RoundRecord) -> None:
        if r.overlapped:
            if r.wall_seconds > 0:
                self.queued.add(r.wall_seconds)
            return
        self.verify.setdefault(r.k + 1, _Mean()).add(r.verify_seconds)
        if r.wall_seconds > 0:
            self.overhead.add(max(0.0, r.wall_seconds - r.draft_seconds - r.verify_seconds))
        if r.k and r.source == "draft":
            for i in range(min(r.accepted + 1, r.k, self.max_k)):
                self.trials[i] += 1
                self.hits[i] += i < r.accepted
            if r.catch_up <= 1:
                self.drafting.setdefault(r.k, _Mean()).add(r.draft_seconds)

    def acceptance(self) -> list[float]:
        """Acceptance by draft position, each given the one before was accepted (a position
        never reached takes the one before's)."""
        rates, prev = [], 0.0
        for h, t in zip(self.hits, self.trials):
            prev = h / t if t else prev
            rates.append(prev)
        return rates

    def oracle(self) -> Oracle | None:
        """None when the rounds cannot tell (no draft-model rounds, or no plain step measured,
        alone or queued)."""
        max_k, trials = self.max_k, self.trials
        if not trials[0] or (1 not in self.verify and not self.queued.n) or not self.drafting:
            return None
        rates = self.acceptance()
        costs = _costs(self.verify, max_k + 1)
        draft = _costs(self.drafting, max_k)
        o = self.overhead.value
        # plain decoding as it runs (its steps queued, the loop's Python hidden) where it was
        # seen; a one-at-a-time plain round otherwise
        plain = 1.0 / self.queued.value if self.queued.n else 1.0 / (o + costs[0])
        observed = max(i + 1 for i in range(max_k) if trials[i])  # no extrapolating acceptance
        speedups = tuple(
            leviathan_rate(rates[:k], draft[k - 1], costs[k], o) / plain for k in range(1, observed + 1)
        )
        best = max(range(observed), key=lambda i: speedups[i])
        return Oracle(best + 1, speedups[best], tuple(rates), speedups)


def best_fixed(rounds: Iterable[RoundRecord], max_k: int = 8) -> Oracle | None:
    """None when the rounds cannot tell (no draft-model rounds, or no plain step measured, alone or queued)."""
    tally = Tally(max_k)
    for r in rounds:
        tally.add(r)
    return tally.oracle()
