"""The adaptive draft-length controller: each round, the k with the most expected tokens per second.

It measures online what it needs, and nothing else (docs/adaptive.md):

* the main's cost of a pass over n tokens (the pending one and k proposals): the median of its
  recent passes per size; a size not measured is priced between its measured neighbours, and
  beyond them on a line fitted through them;
* the proposer's cost of k tokens: a fixed part and a part per token, fitted to recent rounds;
* acceptance by position (proposal i accepted given 0..i-1 were), counts that forget;
* plain decoding's cost per token as the loop plays it: the time between reads of queued plain
  steps (`choose_ahead`), else plain steps timed alone; before any, read off the main's passes.

Its first `learn_rounds` rounds learn: each drafts the k that pays most on a hopeful reading of
the draft's record (`_hopeful_speedups`), from the first round on.

The expected rate of k is Leviathan's (`oracle.leviathan_rate`) at those costs. k = 0 (plain, the
draft bypassed) unless some k beats plain by `margin`. While bypassed a probe (a short draft
round reading at most `probe_read` skipped tokens) is played whenever the probes' budget, a
`probe_share` of the time spent bypassed, affords one; a probe right on all it proposed is
followed by another, so a draft that starts to pay is noticed within a few probes.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from app.engine.decoding.events import Decision, Provenance, Reason, RoundEvent
from app.engine.decoding.policy import DraftPlan, RoundContext
from app.engine.policy.oracle import cost_curve, fit_line
from app.engine.policy.settings import (
    DEFAULT_SETTINGS,
    MAX_K,
    RARELY_RIGHT,
    RARELY_RIGHT_AFTER,
    ControllerSettings,
)

__all__ = ["MAX_K", "AdaptiveDraftLength", "ControllerSettings"]

STATE_VERSION = 3  # what `export_state` writes; any other is another controller's, not restored
PRIOR = 0.5  # acceptance before any round, held at `prior_rounds` rounds' weight
RETIME_EVERY = 4  # plain is re-timed for one step after `window` times this many draft rounds
PRICE_SHRINK = 3.0  # passes' weight of the line through every size, in a size's own price
HOPELESS_SHARE = 1 / 8  # of `probe_share`: probing a draft that could not pay were it always right
CLEAR = 1.25  # of `margin`: a speedup no plain step's noise could undo, so learning may stop
GROW = 2  # a learning round drafts at most this many more than the longest round timed
HOPE = 0.8416  # standard deviations above the mean: a belief's 80th percentile, learning's reading
HOPELESS_AFTER = 4  # proposals judged before learning may drop a draft that pays on no reading
PLAIN_BY = 8  # draft rounds after which plain is timed even where its price seems not to matter
# a speedup on plain priced from the main's passes that its true price could not undo: a queued
# plain step has cost 0.6 of a pass over two tokens (a 14B main on a GPU)
GUESSED_CLEAR = 1.75


def median(values: Iterable[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return 0.0
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def rates_by_k(
    accepted: Sequence[float], main: Sequence[float], draft: Sequence[float], overhead: float
) -> list[float]:
    """Leviathan's rate (`oracle.leviathan_rate`) for k = 1..len(accepted) in one pass, with
    `main[n]` a pass over n + 1 tokens and `draft[k - 1]` drafting k: the expected tokens of k + 1
    proposals are those of k and one more run."""
    rates, tokens, run = [], 1.0, 1.0
    for k, rate in enumerate(accepted, 1):
        run *= rate
        tokens += run
        rates.append(tokens / (overhead + draft[k - 1] + main[k]))
    return rates


class AdaptiveDraftLength:
    """The default policy: the draft model's (or, with `use_draft=False`, prompt lookup's) draft
    length by expected tokens per second, plain where no length pays. `clock` times the rounds
    (the replay runs it on simulated time)."""

    def __init__(
        self,
        use_draft: bool = True,
        settings: ControllerSettings | None = None,
        *,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.settings = s = settings or DEFAULT_SETTINGS
        self.source = Provenance.DRAFT if use_draft else Provenance.LOOKUP
        self._clock = clock
        self.main: dict[int, deque[float]] = {}  # seconds of a main pass over n tokens, by n
        self._main_medians: dict[int, float] = {}  # each size's median, until that size is timed again
        # main_costs' and draft_costs' curves by (up_to, untried_at_best), until a pass is timed
        self._main_curves: dict[tuple[int, bool], list[float]] = {}
        self._draft_curves: dict[int, list[float]] = {}
        self.drafts: deque[tuple[int, float]] = deque(maxlen=2 * s.window)  # (k, seconds proposing)
        self.queued: deque[float] = deque(maxlen=s.window)  # per token, plain steps queued
        self.alone: deque[float] = deque(maxlen=s.window)  # per token, plain rounds timed alone
        self.overhead: deque[float] = deque(maxlen=s.window)  # a speculative round outside its passes
        self.probes: deque[float] = deque(maxlen=s.window)  # what probes really cost
        self.hits, self.trials = [0.0] * s.max_k, [0.0] * s.max_k  # by position, forgetting
        self.record = ([0.0] * s.max_k, [0.0] * s.max_k)  # the same over the draft's life
        # the first proposal's (hits, trials) after a round right on all it proposed, and after
        # one that was not: text is right and wrong in runs, so the last round tells the next
        self.after = {True: [0.0, 0.0], False: [0.0, 0.0]}
        self._context: bool | None = None  # whether the source's last round was all right, if it was the last
        self.right, self.judged = 0, 0  # the draft's proposals over its life, for the status strip
        self.drafted = 0  # rounds the source proposed in
        self.credit = 0.0  # seconds of probing the budget affords now
        self._follow_up = False  # the last probe was right on all it proposed: probe again
        self.since_plain = 0  # draft rounds since plain was last timed
        self.retime = 0  # plain steps still to time before the source plays again
        self._rates: dict[bool | None, list[float]] = {}  # tokens/s by k, by context, until something changes
        self._accepted: dict[bool | None, list[float]] = {}  # acceptance(context), as long as the rates
        # (plain's price, speedups) by context, as long as the rates
        self._speedups: dict[bool | None, tuple[float, list[float]]] = {}
        self._prices: tuple[list[float], list[float], float] | None = (
            None  # (main, draft, overhead) behind them
        )
        # tokens/s were every proposal accepted, until a draft round (or a restore) changes a price
        self._best_if_right: float | None = None
        self._ahead: DraftPlan | None = None  # the next round's plan, chosen a round early
        self._chosen = False  # `choose` ran for the round being played (a queued one skips it)
        self._plain: float | None = None  # plain_cost, until plain is timed again
        self._too_dear = False  # learning found no acceptance would make it pay: no learning again
        self._last_observed: float | None = None
        self._decision = Decision(Reason.LEARN, s.start_k, self.source)

    # -- what the loop asks -------------------------------------------------------------------

    def begin_answer(self) -> None:
        """A new answer: keep everything learnt, but the pause is no round's cost, and new
        text is not the last answer's: recent acceptance is held at `prior_rounds` rounds' weight
        (a draft right on code started a poem at k = 7)."""
        self._last_observed, self._ahead, self._chosen = None, None, False
        scale = min(1.0, self.settings.prior_rounds / max(self.trials[0], 1e-9))
        self.hits = [h * scale for h in self.hits]
        self.trials = [t * scale for t in self.trials]
        self._context = None
        self._invalidate(prices=False)

    def wants_draft_prefill(self) -> bool:
        """The draft reads the prompt unless it starts the answer bypassed (a probe then reads
        only the last few tokens, and a gap costs context, never correctness)."""
        return self.source is Provenance.DRAFT and not self._decision.bypassed

    def decision(self) -> Decision:
        return self._decision

    def choose(self, context: RoundContext) -> DraftPlan:
        self._chosen = True
        if self._ahead is not None:  # chosen a round early (choose_ahead)
            plan, self._ahead = self._ahead, None
            return plan
        return self._choose(context)

    def choose_ahead(self, context: RoundContext) -> bool:
        """Choose the next round during this plain one: plain commits it (the loop queues its
        pass under this one's, so a bypassed draft decodes as fast as plain); a draft round is
        kept for the next `choose`."""
        self._context = None  # after this plain step the draft's state is not known
        plan = self._choose(context)
        if plan.k:
            self._ahead = plan
            return False
        # learning's first plain step is not priced until it is observed: queued now, the next
        # step would be plain too, and a draft that then reads several tokens is not timed
        return bool(self.queued or self.alone) or self._decision.reason is not Reason.LEARN

    def _available(self, context: RoundContext) -> int:
        cap = min(self.settings.max_k, context.remaining - 1)
        if self.source is Provenance.LOOKUP:
            return max(0, min(cap, context.lookup_len))
        return max(0, cap) if context.has_draft else 0

    def _choose(self, context: RoundContext) -> DraftPlan:
        s, source = self.settings, self.source
        available = self._available(context)
        if self._learning():
            # learning plays the k that pays most on a hopeful reading of what it has seen, so a
            # good draft is drafted long from its second round, and a dear one is found out
            if not available or self._plain_wanted():
                return self._decide(DraftPlan(0, Provenance.MAIN), Reason.LEARN)
            return self._decide(DraftPlan(self._learning_k(available), source, s.probe_read), Reason.LEARN)
        if self.retime or self._plain_wanted():  # plain is (re-)timed now and then (see `observe`)
            return self._decide(DraftPlan(0, Provenance.MAIN), Reason.LEARN)
        speedups = self.speedups()
        k = max(range(1, max(available, 1) + 1), key=lambda k: speedups[k - 1])
        if not available:  # nothing to propose this round: plain, and whether it would draft
            would = Reason.BEST if speedups[k - 1] >= s.margin else Reason.BYPASS
            return self._decide(DraftPlan(0, Provenance.MAIN), would, speedups, 1.0)
        paying = speedups[k - 1] >= s.margin
        if paying and not self._decision.bypassed:
            # whether to draft rests on acceptance overall; how long, on what the last round saw
            speedups = self.speedups(self._context)
            k = max(range(1, available + 1), key=lambda k: speedups[k - 1])
            if speedups[k - 1] < 1.0:  # after a miss, in a wrong run: one plain step
                return self._decide(DraftPlan(0, Provenance.MAIN), Reason.BEST, speedups, 1.0)
            return self._decide(DraftPlan(k, source, s.probe_read), Reason.BEST, speedups, speedups[k - 1])
        # a bypassed draft comes back through a probe (it is the cheap round that checks the
        # estimates' drift back towards the record), otherwise when the budget affords one
        if paying or self._follow_up or self.credit >= self.probe_price():
            k = min(s.probe_k, available)
            return self._decide(DraftPlan(k, source, s.probe_read), Reason.PROBE, speedups, speedups[k - 1])
        return self._decide(DraftPlan(0, Provenance.MAIN), Reason.BYPASS, speedups, 1.0)

    def _decide(
        self, plan: DraftPlan, reason: Reason, speedups: list[float] | None = None, expected: float = 0.0
    ) -> DraftPlan:
        rarely = self.judged >= RARELY_RIGHT_AFTER and self.right < RARELY_RIGHT * self.judged
        self._decision = Decision(
            reason,
            plan.k,
            self.source,
            expected,
            tuple(speedups or ()),
            tuple(self.acceptance()),
            (self.right, self.judged) if rarely and self.source is Provenance.DRAFT else None,
        )
        return plan

    # -- the estimates ------------------------------------------------------------------------

    def _learning(self) -> bool:
        """Too little seen to trust the estimates: the source's first `learn_rounds` rounds,
        unless no acceptance would make the draft pay, or, once plain is timed, not even a
        hopeful reading of `HOPELESS_AFTER` judged proposals does."""
        s = self.settings
        if self._too_dear or self.drafted >= s.learn_rounds:
            return False
        if not self.drafted:
            return True
        if self._plain_timed() and not self._could_pay():
            # no acceptance would make a draft that dear pay: nothing to learn, and a plain step
            # priced a little higher later does not make it worth learning again
            self._too_dear = True
            return False
        # a draft not worth it even on a hopeful reading of a few proposals is dropped
        hopeless = self.judged >= HOPELESS_AFTER and max(self._hopeful_speedups()) < s.margin
        return not (self._plain_timed() and hopeless)

    def _plain_timed(self) -> bool:
        return bool(self.queued or self.alone)

    def _plain_wanted(self) -> bool:
        """Whether plain needs a step timed now. Before any, plain is priced on the main's
        passes (`plain_cost`), and a step of its own waits while drafting pays by more than that
        guess could be wrong by, for at most `PLAIN_BY` rounds: in a short answer a plain step
        costs as much as the draft's gain on a round. Then, until `learn_rounds` steps are
        timed, while drafting pays by less than a plain step's noise could undo."""
        s, timed = self.settings, len(self.queued) + len(self.alone)
        if not self.drafted or timed >= s.learn_rounds:
            return False
        if not timed:
            if not self._timed_prices():  # a state restored without prices: nothing to guess from
                return True
            hoped = max(self._hopeful_speedups())
            return hoped < GUESSED_CLEAR * s.margin or self.drafted >= PLAIN_BY
        clear = max(self.speedups()) >= CLEAR * s.margin
        return not clear and self.drafted >= s.learn_rounds and self._could_pay()

    def _learning_k(self, available: int) -> int:
        """A learning round's length: `start_k` before anything is seen, then the k whose
        hopeful reading pays most; 1, the cheapest round to learn from, where none pays even so
        (two unlucky rounds are too few to drop a draft on)."""
        if not self.drafted:
            return min(self.settings.start_k, available)
        # at most GROW past the longest pass timed: a longer pass's price is only hoped
        longest = max(self._timed_prices(), default=2) - 1
        top = min(available, max(longest, 1) + GROW)
        speedups = self._hopeful_speedups()[:top]
        k = max(range(1, top + 1), key=lambda k: speedups[k - 1])
        return k if speedups[k - 1] >= self.settings.margin else 1

    def _hopeful_speedups(self) -> list[float]:
        """Speedups of k = 1..max_k were every proposal right as often as the upper reading
        (`HOPE`) of the draft's record allows: what learning bets on, since a round at a
        length that turns out too long costs less than an answer held short."""
        hits, trials = sum(self.record[0]), sum(self.record[1])
        a, b = 1.0 + hits, 1.0 + trials - hits
        spread = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0)))
        hope = min(0.99, a / (a + b) + HOPE * spread)
        max_k, plain = self.settings.max_k, self.plain_cost()
        main, draft, overhead = self.main_costs(max_k + 1), self.draft_costs(max_k), median(self.overhead)
        timed = self._timed_prices()
        if len(timed) == 1:  # one size says nothing of how a pass grows: hope it does not
            main = list(timed.values()) * (max_k + 1)
        return [plain * rate for rate in rates_by_k([hope] * max_k, main, draft, overhead)]

    def acceptance(self, context: bool | None = None) -> list[float]:
        """Acceptance by position: recent counts shrunk towards the draft's life-long record
        where they are thin (so as they fade while the draft sits out, it drifts back to its
        record: a draft dropped on a hard stretch returns, one useless overall never does).
        With a `context` (whether the last round was right on all it proposed), the first
        proposal's is that context's, shrunk towards the overall one."""
        cached = self._accepted.get(context)
        if cached is not None:
            return cached
        weight, before, out = self.settings.prior_rounds, PRIOR, []
        for hits, trials, ever_hit, ever_tried in zip(self.hits, self.trials, *self.record):
            before = (ever_hit + weight * before) / (ever_tried + weight)  # the record, by position
            out.append((hits + weight * before) / (trials + weight))
        if context is not None:
            hits, trials = self.after[context]
            out[0] = (hits + weight * out[0]) / (trials + weight)
        self._accepted[context] = out
        return out

    def plain_cost(self) -> float:
        """Seconds per token of plain decoding as the loop plays it: queued where it queues, and
        never dearer than a step timed alone (a queue only hides work, so dearer is a stall).
        Before any plain step, the main's passes say it: the line through their sizes at one
        token, or with one size, that size's price (a pass over a few tokens costs about one
        over one, where drafting pays)."""
        if self._plain is None:
            queued, alone = median(self.queued), median(self.alone)
            self._plain = min(queued, alone) if queued and alone else queued or alone
            if not self._plain:
                self._plain = self._plain_from_passes()
        return self._plain

    def _plain_from_passes(self) -> float:
        prices = self._timed_prices()
        if not prices:
            return 0.0
        smallest = min(prices)
        if len(prices) == 1:
            return prices[smallest]
        fixed, per_token = fit_line([(n, v, len(self.main[n])) for n, v in prices.items()])
        return min(prices[smallest], max(fixed + per_token, prices[smallest] / smallest))

    def _timed_prices(self) -> dict[int, float]:
        """Each timed pass size's median, a fresh dict (each size's kept until it is timed again)."""
        medians, prices = self._main_medians, {}
        for n, passes in self.main.items():
            if passes:
                price = medians.get(n)
                prices[n] = medians[n] = median(passes) if price is None else price
        return prices

    def main_costs(self, up_to: int, untried_at_best: bool = True) -> list[float]:
        """Seconds of a main pass over n = 1..up_to tokens: measured sizes at their median,
        sizes between two measured ones on the straight line between them, the rest on the
        line fitted through every measured size; never dearer for fewer tokens."""
        curve = self._main_curves.get((up_to, untried_at_best))
        if curve is not None:
            return curve
        measured = self._timed_prices()
        if not measured:
            return [self.plain_cost()] * up_to
        sizes = sorted(measured)
        for a, b in zip(sizes, sizes[1:]):
            for n in range(a + 1, b):
                measured[n] = measured[a] + (measured[b] - measured[a]) * (n - a) / (b - a)
        # above the largest size played, the cheapest it could cost: a price too high is never
        # played, so nothing would correct it (a bf16 verify of 9 tokens costs about one of 4)
        for n in range(sizes[-1] + 1, up_to + 1 if untried_at_best else 0):
            measured[n] = measured[sizes[-1]]
        line = fit_line([(n, measured[n], len(self.main[n])) for n in sizes])
        for n in sizes[1:] if sizes[0] == 1 else sizes:  # a plain step is no point on the line
            # a size seen a few times is held near the line through all of them: one unlucky
            # pass would otherwise price it out for good, as a size not played is not re-timed
            seen, on_line = len(self.main[n]), line[0] + line[1] * n
            measured[n] = (seen * measured[n] + PRICE_SHRINK * on_line) / (seen + PRICE_SHRINK)
        curve = self._main_curves[(up_to, untried_at_best)] = cost_curve(measured, line, up_to)
        return curve

    def draft_costs(self, up_to: int) -> list[float]:
        """Seconds proposing k = 1..up_to tokens: a fixed part and a part per token, fitted."""
        if not self.drafts:
            return [0.0] * up_to
        curve = self._draft_curves.get(up_to)
        if curve is None:
            fixed, per_token = fit_line([(n, seconds, 1.0) for n, seconds in self.drafts])
            curve = self._draft_curves[up_to] = [max(0.0, fixed + per_token * k) for k in range(1, up_to + 1)]
        return curve

    def speedups(self, context: bool | None = None) -> list[float]:
        """Expected speed of k = 1..max_k over plain decoding (after a round that was, or was
        not, right on all it proposed, with a `context`)."""
        plain = self.plain_cost()
        cached = self._speedups.get(context)
        if cached is not None and cached[0] == plain:
            return cached[1]
        rates = self._rates.get(context)
        if rates is None:
            max_k, accepted = self.settings.max_k, self.acceptance(context)
            if self._prices is None:  # both contexts' rates rest on the same prices
                self._prices = (self.main_costs(max_k + 1), self.draft_costs(max_k), median(self.overhead))
            rates = self._rates[context] = rates_by_k(accepted, *self._prices)
        speedups = [rate * plain for rate in rates]
        self._speedups[context] = (plain, speedups)
        return speedups

    def _invalidate(self, prices: bool = True) -> None:
        self._rates, self._prices, self._accepted, self._speedups = {}, None, {}, {}
        if prices:
            self._best_if_right = None

    def _could_pay(self) -> bool:
        """Whether some k would pay were every proposal accepted: else only prices can change."""
        if self._best_if_right is None:
            max_k, overhead = self.settings.max_k, median(self.overhead)
            # on measured prices only: a probe's follow-up must rest on what was seen
            main, draft = self.main_costs(max_k + 1, untried_at_best=False), self.draft_costs(max_k)
            self._best_if_right = max(
                (k + 1) / (draft[k - 1] + main[k] + overhead) for k in range(1, max_k + 1)
            )
        return self._best_if_right * self.plain_cost() >= self.settings.margin

    def probe_price(self) -> float:
        """What a probe costs: as measured, or before any, its passes as priced."""
        if self.probes:
            return median(self.probes)
        k = self.settings.probe_k
        return self.draft_costs(k)[-1] + self.main_costs(k + 1)[k] + median(self.overhead)

    # -- learning from a round ----------------------------------------------------------------

    def observe(self, event: RoundEvent) -> None:
        now = self._clock()
        wall = now - self._last_observed if self._last_observed is not None else None
        self._last_observed = now
        reason = event.decision.reason
        queued, self._chosen = not self._chosen, False
        if event.overlapped:
            # a queued plain step: the time between reads is a token's real cost; the first of
            # a queue (chosen, not queued) was timed alone with some of the next one's work
            if queued:
                self.queued.append(event.draft_seconds + event.verify_seconds)
                self._plain = None
        elif event.k == 0:
            self.main.setdefault(1, deque(maxlen=self.settings.window)).append(event.verify_seconds)
            self._main_medians.pop(1, None)
            self._main_curves = {}
            self.alone.append(wall if wall is not None else event.verify_seconds)
            self._plain = None
            self._invalidate(prices=False)  # a plain step is no draft round's price
        if event.k == 0:
            self._context = None  # the draft's state after tokens it did not propose is not known
            self.since_plain = 0
            self.retime = max(0, self.retime - 1)
            if reason is Reason.BYPASS:
                self._forget()  # the budget grows with the time spent bypassed, up to a probe
                share = self.settings.probe_share * self.plain_cost() * len(event.emitted)
                share *= 1.0 if self._could_pay() else HOPELESS_SHARE  # a probe can win nothing
                self.credit = min(self.credit + share, self.probe_price())
            return
        if event.source is not self.source:
            return
        self._count(event.k, event.accepted)
        self._context = event.accepted == event.k
        self.since_plain += 1
        if self.since_plain >= self.settings.window * RETIME_EVERY:
            # plain is timed only while the source sits out: steps caught in a host stall would
            # price it high for as long as the source plays, so a fresh step joins the window
            self.retime, self.since_plain = 1, 0
        self.main.setdefault(event.k + 1, deque(maxlen=self.settings.window)).append(event.verify_seconds)
        self._main_medians.pop(event.k + 1, None)
        self._main_curves = {}
        if not self._plain_timed():
            self._plain = None  # priced on the passes until a plain step is timed
        if event.catch_up <= 1:  # a long catch-up is not a k-token draft's cost
            self.drafts.append((event.k, event.draft_seconds))
            self._draft_curves = {}
        if wall is not None:
            self.overhead.append(max(0.0, wall - event.draft_seconds - event.verify_seconds))
        if reason is Reason.PROBE:
            cost = wall if wall is not None else event.draft_seconds + event.verify_seconds
            self.probes.append(cost)
            self.credit -= cost
            self._follow_up = event.accepted == event.k and self._could_pay()
        else:
            self._follow_up = False
        self._invalidate()

    def _forget(self) -> None:
        forget = self.settings.forget
        self.hits = [h * forget for h in self.hits]
        self.trials = [t * forget for t in self.trials]
        for counts in self.after.values():
            counts[0] *= forget
            counts[1] *= forget
        self._invalidate(prices=False)

    def _count(self, k: int, accepted: int) -> None:
        self._forget()
        if self._context is not None:
            counts = self.after[self._context]
            counts[0] += accepted > 0
            counts[1] += 1
        for i in range(min(accepted + 1, k, self.settings.max_k)):
            for hits, trials in ((self.hits, self.trials), self.record):
                trials[i] += 1
                hits[i] += i < accepted
        self.drafted += 1
        if self.source is Provenance.DRAFT:
            self.judged += min(accepted + 1, k)
            self.right += accepted

    # -- saved state --------------------------------------------------------------------------

    def export_state(self) -> dict[str, object]:
        """What this controller learnt about a pair, JSON-ready: its measured costs and
        acceptance, so the pair's next session starts from them."""
        return {
            "version": STATE_VERSION,
            "source": self.source.value,
            "main": {str(n): list(v) for n, v in self.main.items()},
            "drafts": [list(d) for d in self.drafts],
            "queued": list(self.queued),
            "alone": list(self.alone),
            "overhead": list(self.overhead),
            "probes": list(self.probes),
            "hits": list(self.hits),
            "trials": list(self.trials),
            "record": [list(self.record[0]), list(self.record[1])],
            "after": [self.after[True], self.after[False]],
            "counts": [self.right, self.judged, self.drafted],
        }

    def restore_state(self, state: object) -> bool:
        """Start from `state` (`export_state`'s); False, and nothing changed, when it is another
        controller's or another source's, or malformed."""
        try:
            restored = self._read_state(state)
        except (KeyError, TypeError, ValueError, AttributeError):
            return False
        if restored is None:
            return False
        for name, value in restored.items():
            setattr(self, name, value)
        self._plain, self._main_medians, self._main_curves, self._draft_curves = None, {}, {}, {}
        self._invalidate()
        return True

    def _read_state(self, state: object) -> dict[str, object] | None:
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            return None
        if state["source"] != self.source.value:
            return None
        window = self.settings.window

        def seconds(values: object, size: int = window) -> deque[float]:
            if not isinstance(values, list):
                raise TypeError("a list of seconds")
            out = [float(v) for v in values]
            if not all(math.isfinite(v) and v >= 0 for v in out):
                raise ValueError("seconds are finite and not negative")
            return deque(out, maxlen=size)

        main = {int(n): seconds(v) for n, v in dict(state["main"]).items()}
        if any(not 1 <= n <= self.settings.max_k + 1 for n in main):
            return None
        drafts = [(int(k), float(s)) for k, s in state["drafts"]]
        if any(not 1 <= k <= self.settings.max_k or not math.isfinite(s) or s < 0 for k, s in drafts):
            return None
        hits, trials = [float(h) for h in state["hits"]], [float(t) for t in state["trials"]]
        if len(hits) != self.settings.max_k or len(trials) != len(hits):
            return None
        if any(not 0 <= h <= t for h, t in zip(hits, trials)) or not all(map(math.isfinite, trials)):
            return None
        ever_hit, ever_tried = ([float(v) for v in counts] for counts in state["record"])
        if len(ever_hit) != len(hits) or len(ever_tried) != len(hits):
            return None
        if any(not 0 <= h <= t for h, t in zip(ever_hit, ever_tried)) or not all(
            map(math.isfinite, ever_tried)
        ):
            return None
        after = [[float(h), float(t)] for h, t in state["after"]]
        if len(after) != 2 or any(not 0 <= h <= t or not math.isfinite(t) for h, t in after):
            return None
        right, judged, drafted = (int(c) for c in state["counts"])
        if not 0 <= right <= judged or drafted < 0:
            return None
        return {
            "main": main,
            "drafts": deque(drafts, maxlen=2 * window),
            "queued": seconds(state["queued"]),
            "alone": seconds(state["alone"]),
            "overhead": seconds(state["overhead"]),
            "probes": seconds(state["probes"]),
            "hits": hits,
            "trials": trials,
            "record": (ever_hit, ever_tried),
            "after": {True: after[0], False: after[1]},
            "right": right,
            "judged": judged,
            "drafted": drafted,
        }
