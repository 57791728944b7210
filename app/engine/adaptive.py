"""The adaptive draft-length controller: each round, the k and source that maximise tokens/second.

It keeps running estimates of what this machine and this text are like, and nothing else:

* per source (draft model, prompt lookup), the chance that proposal i is accepted given that
  proposals 0..i-1 were (exponentially forgetting, shrunk towards position i-1 where data is thin);
* measured costs: a draft step, a verify pass over n tokens for every n seen (unseen n are fitted
  by least squares on the seen ones, never assumed), and the round's fixed overhead.

Expected rate of (k, source) = (1 + Σ_j Π_{i<j} a_i) / (overhead + k·step + verify(k + 1)).
When plain decoding (k = 0) wins, the draft is bypassed: no draft passes at all, only a probe now
and then, spaced so that probes cost at most `probe_budget` of the plain decoding time.
"""

from __future__ import annotations

import math
import time

from app.engine.events import Provenance, RoundEvent
from app.engine.policy import MAX_DRAFT, DraftPlan, RoundContext

DRAFT, LOOKUP, MAIN = Provenance.DRAFT, Provenance.LOOKUP, Provenance.MAIN


class _Mean:
    """Exponentially weighted mean; one outlier (another process hogging the CPU) is clipped."""

    def __init__(self, alpha: float = 0.25) -> None:
        self.alpha, self.value, self.count = alpha, 0.0, 0

    def add(self, x: float) -> None:
        if self.count == 0:
            self.value = x
        else:
            x = min(x, 3.0 * self.value) if self.value > 0 else x
            self.value += self.alpha * (x - self.value)
        self.count += 1


class _Acceptance:
    """Discounted accept/trial counts per draft position."""

    def __init__(self, prior: float, weight: float, decay: float) -> None:
        self.prior, self.weight, self.decay = prior, weight, decay
        self.hits = [0.0] * MAX_DRAFT
        self.trials = [0.0] * MAX_DRAFT
        self.rounds = 0

    def add(self, k: int, accepted: int) -> None:
        self.hits = [h * self.decay for h in self.hits]
        self.trials = [t * self.decay for t in self.trials]
        for i in range(min(accepted + 1, k)):
            self.trials[i] += 1.0
            self.hits[i] += i < accepted
        self.rounds += 1

    def estimates(self, k: int) -> list[float]:
        out, prev = [], self.prior
        for i in range(k):
            prev = (self.hits[i] + self.weight * prev) / (self.trials[i] + self.weight)
            out.append(prev)
        return out


def expected_tokens(rates: list[float]) -> float:
    """1 (the main's own token) plus the expected run of accepted proposals."""
    total, run = 1.0, 1.0
    for a in rates:
        run *= a
        total += run
    return total


class VerifyCosts:
    """Seconds of a verify pass over n tokens: measured per n, fitted where unmeasured."""

    def __init__(self) -> None:
        self.by_n: dict[int, _Mean] = {}

    def add(self, n: int, seconds: float) -> None:
        self.by_n.setdefault(n, _Mean()).add(seconds)

    def known(self) -> bool:
        return len(self.by_n) >= 2

    def _fit(self) -> tuple[float, float]:
        points = [(n, m.value, min(m.count, 8)) for n, m in self.by_n.items()]
        w = sum(c for _, _, c in points)
        mx_ = sum(c * n for n, _, c in points) / w
        my = sum(c * v for _, v, c in points) / w
        var = sum(c * (n - mx_) ** 2 for n, _, c in points)
        slope = sum(c * (n - mx_) * (v - my) for n, v, c in points) / var if var else 0.0
        slope = max(slope, 0.0)
        return my - slope * mx_, slope

    def table(self, up_to: int) -> list[float]:
        """Estimated cost for n = 1..up_to, made non-decreasing in n."""
        base, slope = self._fit()
        out, floor = [], 0.0
        for n in range(1, up_to + 1):
            m = self.by_n.get(n)
            v = m.value if m is not None else base + slope * n
            floor = max(floor, v)
            out.append(floor)
        return out


class AdaptiveDraftLength:
    """The default policy: pick (k, source) by expected tokens per second; bypass when k = 0 wins."""

    def __init__(
        self,
        *,
        use_draft: bool = True,
        use_lookup: bool = True,
        max_k: int = 8,
        first_k: int = 3,
        probe_k: int = 2,
        probe_budget: float = 0.02,
        margin: float = 1.03,
        decay: float = 0.85,
    ) -> None:
        self.sources = [s for s, on in ((DRAFT, use_draft), (LOOKUP, use_lookup)) if on]
        self.max_k, self.first_k, self.probe_k = max_k, first_k, probe_k
        self.probe_budget, self.margin = probe_budget, margin
        self.acceptance = {s: _Acceptance(0.5, 1.0, decay) for s in self.sources}
        self.verify = VerifyCosts()
        self.step = {DRAFT: _Mean(), LOOKUP: _Mean()}
        self.overhead = _Mean()
        self.since_used = {s: 0 for s in self.sources}
        self.last_probe_cost: dict[Provenance, float] = {}
        self._last_observed: float | None = None
        self._last: dict[str, object] = {"policy": "adaptive", "k": 0, "bypassed": False}

    # -- choosing -----------------------------------------------------------------------------

    def _available(self, context: RoundContext, source: Provenance) -> int:
        cap = min(self.max_k, context.remaining - 1)
        if source is DRAFT:
            return cap if context.has_draft else 0
        return min(cap, context.lookup_len)

    def _rate(self, source: Provenance, k: int, costs: list[float]) -> float:
        tokens = expected_tokens(self.acceptance[source].estimates(k)) if k else 1.0
        step = self.step[source].value if k else 0.0
        return tokens / (self.overhead.value + k * step + costs[k + 1])

    def choose(self, context: RoundContext) -> DraftPlan:
        """Pure: the plan for this round from the current estimates (observe updates them)."""
        available = {s: self._available(context, s) for s in self.sources}
        for s in self.sources:  # explore: each usable source once, then one plain step
            if available[s] and self.acceptance[s].rounds == 0:
                return self._note(DraftPlan(min(self.first_k, available[s]), s), "explore")
        if 1 not in self.verify.by_n or not self.verify.known():
            return self._note(DraftPlan(0, MAIN), "explore")
        costs = self.verify.table(self.max_k + 1)
        costs = [0.0] + costs  # costs[n] for a pass over n tokens
        plain = self._rate(MAIN, 0, costs)
        best, best_rate = DraftPlan(0, MAIN), plain * self.margin  # speculate only if it clearly pays
        rates: dict[str, list[float]] = {}
        for s in self.sources:
            rates[s.value] = [round(self._rate(s, k, costs) / plain, 3) for k in range(1, self.max_k + 1)]
            for k in range(1, available[s] + 1):
                rate = self._rate(s, k, costs)
                if rate > best_rate:
                    best, best_rate = DraftPlan(k, s), rate
        probe = self._probe(best, available, costs)
        plan = probe or best
        speedup = self._rate(best.source, best.k, costs) / plain if best.k else 1.0
        return self._note(plan, "probe" if probe else "model", rates, speedup)

    def _probe(self, best: DraftPlan, available: dict[Provenance, int], costs: list[float]) -> DraftPlan | None:
        """Try a source unused for long enough that its probes stay within the budget."""
        plain_round = self.overhead.value + costs[1]
        for s in self.sources:
            if s is best.source or not available[s]:
                continue
            k = min(self.probe_k, available[s])
            extra = self.last_probe_cost.get(s, k * self.step[s].value + costs[k + 1] - costs[1])
            budget = self.probe_budget / len(self.sources) * plain_round
            interval = max(4, math.ceil(extra / budget)) if budget > 0 else 512
            # one unlucky round is thin evidence: recheck soon, unless a probe costs several
            # plain steps (then the budget decides, as for any probe)
            if self.acceptance[s].trials[0] < 1.5 and extra <= 2 * plain_round:
                interval = min(interval, 8)
            if self.since_used[s] >= min(interval, 512):
                return DraftPlan(k, s)
        return None

    def _note(self, plan: DraftPlan, why: str, rates: dict | None = None, speedup: float = 1.0) -> DraftPlan:
        self._last = {
            "policy": "adaptive",
            "k": plan.k,
            "source": (plan.source if plan.k else MAIN).value,
            "why": why,
            "bypassed": plan.k == 0,
            "acceptance": {s.value: tuple(round(a, 3) for a in self.acceptance[s].estimates(self.max_k)) for s in self.sources},
            "draft_step_s": self.step[DRAFT].value,
            "verify_s": {n: m.value for n, m in sorted(self.verify.by_n.items())},
            "overhead_s": self.overhead.value,
            "expected_speedup": round(speedup, 3),
            "speedup_by_k": rates or {},
        }
        return plan

    # -- observing ----------------------------------------------------------------------------

    def observe(self, event: RoundEvent) -> None:
        now = time.perf_counter()
        if self._last_observed is not None:
            wall = now - self._last_observed
            self.overhead.add(max(0.0, wall - event.draft_seconds - event.verify_seconds))
        self._last_observed = now
        self.verify.add(event.k + 1, event.verify_seconds)
        for s in self.sources:
            self.since_used[s] += 1
        source = event.source
        if event.k == 0 or source not in self.acceptance:
            return
        self.since_used[source] = 0
        self.acceptance[source].add(event.k, event.accepted)
        if source is LOOKUP or event.catch_up <= 1:
            self.step[source].add(event.draft_seconds / event.k)
        if self._last.get("why") == "probe":
            self.last_probe_cost[source] = event.draft_seconds + event.verify_seconds - self.verify.table(1)[0]

    def snapshot(self) -> dict[str, object]:
        return dict(self._last)

    def begin_answer(self) -> None:
        """Keep what was learnt about costs and acceptance; don't count the pause as overhead.

        One controller serves every answer of a loaded pair (the worker and the benchmark keep
        it), so only the very first answer pays for exploring.
        """
        self._last_observed = None
