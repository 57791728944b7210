"""The adaptive draft-length controller: each round, the k and source that maximise tokens/second.

It keeps running estimates of what this machine and this text are like, and nothing else:

* per source (draft model, prompt lookup), the chance that proposal i is accepted given that
  proposals 0..i-1 were (exponentially forgetting, shrunk towards position i-1 where data is thin);
* measured costs (`costs.py`): drafting k tokens and a verify pass over n tokens for every size
  seen, the draft's reading of skipped tokens, and the round's fixed overhead. Drafting is not
  k times a step: the first step also reads the tokens the draft has not seen and pays the
  round's one host sync, so it is priced as a fixed part plus a cost per token.

Expected rate of (k, source) = (1 + Σ_j Π_{i<j} a_i) / (overhead + draft(k) + verify(k + 1)).
When plain decoding (k = 0) wins, the draft is bypassed: no draft passes at all, only a probe now
and then within `probe_budget` of the plain decoding time (its `Prober`). While bypassed, the
main's confidence in each token it writes is read as the draft's likely hit there
(ConfidenceLink), so the draft comes back when the text turns predictable without any probe;
until that link is learnt, a draft whose long-run record says it usually pays is probed
whatever reading costs. Each answer starts from that record.

Prompt lookup costs nothing to consult, so it is scored every round even when not used: its
candidates are compared with what the round emitted (for sampled tokens the chance of a match is
exactly residual acceptance's chance for a certain proposal). It never needs a probe.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from app.engine.decoding.events import Provenance, RoundEvent
from app.engine.decoding.lookup import ShadowTrials
from app.engine.decoding.policy import MAX_DRAFT, DraftPlan, RoundContext
from app.engine.policy.confidence import ConfidenceLink
from app.engine.policy.config import DEFAULTS, MAX_K, AdaptiveConfig
from app.engine.policy.costs import CostTable, QueuedSteps, RecentMedian, VerifyCosts, speedups
from app.engine.policy.estimates import AcceptanceCounts
from app.engine.policy.hindsight import DraftHindsight
from app.engine.policy.one_time import OneTimeCosts
from app.engine.policy.probing import Prober, Standing
from app.engine.policy.recheck import PriceRecheck
from app.engine.policy.snapshot import describe
from app.engine.policy.staying import StayRule

__all__ = ["MAX_K", "AdaptiveConfig", "AdaptiveDraftLength"]

DRAFT, LOOKUP, MAIN = Provenance.DRAFT, Provenance.LOOKUP, Provenance.MAIN


class AdaptiveDraftLength:
    """The default policy: pick (k, source) by expected tokens per second; bypass when k = 0 wins.

    `use_draft` and `use_lookup` choose its sources; `clock` is what it times rounds by (the
    replay runs it on simulated time)."""

    def __init__(
        self,
        config: AdaptiveConfig = DEFAULTS,
        *,
        use_draft: bool = True,
        use_lookup: bool = True,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.config, self._clock = config, clock
        self.sources = [s for s, on in ((DRAFT, use_draft), (LOOKUP, use_lookup)) if on]
        self.prober = Prober(config)  # when a bypassed source is tried again
        self.recheck = PriceRecheck()  # prices from a stall or a slower spell, played again
        self.stay = StayRule(config)  # whether a chosen draft plays on just under the margin
        self._rounds_at_k = 0  # rounds in a row at the model's best k, for neighbour checks
        self._best_speedup: dict[Provenance, float] = {}
        self.acceptance = {s: AcceptanceCounts(0.5, 1.0, config.decay) for s in self.sources}
        # the draft's long-run record over every answer: where each new answer starts from
        self.record = AcceptanceCounts(0.5, 1.0, 0.995)
        self.verify = VerifyCosts()
        reference = self.verify.plain_step
        self.drafting = {DRAFT: CostTable(reference), LOOKUP: CostTable(reference)}  # proposing k tokens
        self.overhead = RecentMedian()
        self.one_time = OneTimeCosts(config.one_time_factor, config.one_time_floor)
        self.since_used = {s: 0 for s in self.sources}
        self.played = {s: 0 for s in self.sources}
        self.catch_up_read = RecentMedian()  # per skipped token the draft reads, in plain rounds
        # the main's confidence while the draft sits out, read as the draft's likely hit rate
        self.link = ConfidenceLink()
        self.hindsight = DraftHindsight(config, self.link)  # what the draft would have done
        self._plan = DraftPlan(0, MAIN)  # this round's
        # rounds left to coast (no full choice), and plain's price when the coasting began
        self._coast, self._coast_plain = 0, 0.0
        self._ahead: DraftPlan | None = None  # the next round's plan, chosen a round early
        # per token, plain steps queued under the round before (see choose_ahead), in multiples
        # of a plain step timed alone (the reference), so that they follow the machine's speed
        self.queued_plain = QueuedSteps()
        self.verify.followers = [*self.drafting.values(), self.queued_plain]
        self._queues, self._queue_tried = False, 0
        self._since_clean = 0  # rounds since a plain step timed alone
        self._clean_gap = config.clean_every  # rounds between them, longer while coasting
        self._clean_plain = 0.0  # plain's price in plain steps as of the last one
        self._last_observed: float | None = None
        self._shadow: tuple[int, ...] = ()  # this round's lookup candidates, scored in observe
        self._shadows = ShadowTrials(2 * MAX_DRAFT)  # unused lookup proposals, scored as text comes
        self._last: dict[str, object] = {"policy": "adaptive", "k": 0, "bypassed": False}

    # the settings tests and tools read most, by their old names
    max_k = property(lambda self: self.config.max_k)
    probe_read = property(lambda self: self.config.probe_read)
    confidence_lead = property(lambda self: self.config.confidence_lead)

    # -- choosing -----------------------------------------------------------------------------

    @property
    def wants_confidence(self) -> bool:
        """Whether the loop computes the main's confidence in this round's tokens: a reduction
        over every scored row, a visible share of a step as short as a GPU's on a small model. Draft
        rounds need it (their verdicts teach the link), bypassed rounds while the link predicts,
        or while it is still learning and a probe is near enough that its hindsight will judge
        these tokens (a useless draft, probed every few hundred rounds, paid it on every plain
        step), and a draft whose hits the main's confidence does not tell apart stops paying."""
        if DRAFT not in self.acceptance:
            return False
        if self._plan.k and self._plan.source is DRAFT:
            # every draft round until the link has seen enough, and every round short of the
            # longest draft (its last token's confidence prices one position deeper); else one
            # in four: once the link is settled, a reduction every round costs more than it teaches
            return (
                self._plan.k < self.config.max_k
                or self.link.seen < 2 * self.link.minimum_seen
                or self.played[DRAFT] % 4 == 0
            )
        if self.link.informative():
            return True
        learning = self.link.seen < 2 * self.link.minimum_seen
        return learning and self.prober.due - self.since_used[DRAFT] <= self.config.confidence_lead

    def _lookup_waits(self, context: RoundContext) -> bool:
        """Whether prompt lookup, a source of this controller's, has a match to be weighed."""
        return bool(context.lookup_len) and LOOKUP in self.acceptance

    def choose_ahead(self, context: RoundContext) -> bool:
        """Make the next round's choice now, before this plain round's token is read (`context`
        is the next round's as far as it is known: lookup's match is this round's, and this
        round is not observed yet). A plain choice commits that round, and the loop queues its
        pass under this one; a speculative one is kept and played next round. So a bypassed
        draft costs what plain decoding costs: the loop's Python, a real share of a step on a
        fast GPU, runs while the device works. Not while the costs wait for a plain step timed
        alone (a queued one is not), nor for one in `clean_every` rounds (`coasting_clean_every`
        while coasting), which keeps the reference every cost is kept against current."""
        self._queues = True  # this loop queues plain steps: their speed is worth exploring
        if self._plan.k or not self.verify.known() or self._since_clean >= self._clean_gap:
            return False
        plan = self.choose(context)
        if plan.k:
            self._ahead = plan
            return False
        return True

    def _available(self, context: RoundContext, source: Provenance) -> int:
        cap = min(self.config.max_k, context.remaining - 1)
        if source is DRAFT:
            return cap if context.has_draft else 0
        return min(cap, context.lookup_len)

    def choose(self, context: RoundContext) -> DraftPlan:
        """Pure: the plan for this round from the current estimates (observe updates them).

        It runs every round between the main's passes, so its Python time is a cost of its own
        (on a fast GPU step, a share of it): the estimates are recomputed only when their counts
        changed, the telemetry keeps raw numbers, and a draft that clearly does not pay is
        reconsidered every few rounds while the main's confidence predicts its hits, else once
        a probe has been (and at once when lookup has a candidate or plain's price moved)."""
        if self._ahead is not None:  # chosen a round early (choose_ahead)
            plan, self._ahead = self._ahead, None
            self._shadow = context.lookup if LOOKUP in self.acceptance else ()
            return plan
        if DRAFT in self.acceptance and (recheck := self.recheck.take(self._available(context, DRAFT))):
            return self._note(recheck, "recheck")
        if (
            self._coast
            and not self._lookup_waits(context)
            and self.since_used.get(DRAFT, 0) < self.prober.due
            and abs(self._plain_in_steps() - self._coast_plain) <= 0.05 * self._coast_plain
        ):
            self._coast -= 1
            self._shadow = ()
            self._last["why"] = "coasting"  # the rest is the last full choice's (snapshot copies it)
            return self._plan
        available = {s: self._available(context, s) for s in self.sources}
        self._shadow = context.lookup if LOOKUP in self.acceptance else ()
        for s in self.sources:  # explore: each usable model source a few rounds, then one plain step
            seen = self.played[s]  # real rounds: lookup's shadow scores price no verify pass
            if available[s] and seen < (self.config.explore_rounds if s is DRAFT else 1):
                k = self.config.first_k if seen == 0 else 1  # a second size prices the draft's fixed cost
                return self._note(DraftPlan(min(k, available[s]), s), "explore")
        if not self.verify.known():  # costs wait for a plain step, the reference they are kept against
            return self._note(DraftPlan(0, MAIN), "explore")
        if self._queues and self.queued_plain.rounds < 3 and self._queue_tried < self.config.queue_trials:
            # plain as a bypass plays it (queued) is what speculation must beat: priced by a round
            # timed alone (dearer), a draft would keep playing short rounds that lose to plain
            self._queue_tried += 1
            return self._note(DraftPlan(0, MAIN), "explore")
        max_k, overhead = self.config.max_k, self.overhead.value
        costs = [0.0] + self.verify.table(max_k + 1)  # costs[n] for a pass over n tokens
        draft = {s: [0.0] + self.drafting[s].table(max_k) for s in self.sources}
        plain_seconds = self.plain_seconds(costs[1])
        best, best_speedup = DraftPlan(0, MAIN), self.config.margin  # speculate only if it clearly pays
        rates: dict[str, tuple[float, ...]] = {}
        for s in self.sources:
            by_k = speedups(self.acceptance[s].tokens(max_k), plain_seconds, overhead, draft[s], costs, max_k)
            rates[s.value] = tuple(by_k)
            self._best_speedup[s] = max(by_k[: max(available[s], 1)])
            for k in range(1, available[s] + 1):
                if by_k[k - 1] > best_speedup:
                    best, best_speedup = DraftPlan(k, s), by_k[k - 1]
        if DRAFT in self.acceptance:  # a chosen draft just under the margin may play on
            prices, point = (plain_seconds, overhead, draft[DRAFT], costs), rates[DRAFT.value]
            last = (self._plan, self._last.get("why"))
            if stay := self.stay.plan(best, last, available[DRAFT], self.acceptance[DRAFT], prices, point):
                return self._note(stay, "stay", rates, point[stay.k - 1])
        self.prober.due = 1 << 30
        probe = self.prober.probe(best, self._standing(available, costs, draft, plain_seconds))
        neighbour = None if probe else self._neighbour(best, available)
        plan = probe or neighbour or best
        clear_loss = self._best_speedup.get(DRAFT, 0.0) < 0.9 * self.config.margin
        # until a probe is due only the link's predictions move the draft's estimates: without them
        # it coasts to the probe (queued plain steps, see choose_ahead); lookup's candidates wake it
        coast = self.config.coast_rounds if self.link.informative() else 1 << 30
        self._coast = coast if not plan.k and clear_loss else 0
        # plain's own price moves while the draft sits out (the machine slows, the context grows):
        # coasting ends when it does, or a draft priced against a faster moment stays out
        self._coast_plain = self._plain_in_steps()
        # a host's noise moves that price by 5-10%; a machine that changed speed, by more
        steady = self._coast and abs(self._coast_plain - self._clean_plain) <= 0.15 * self._clean_plain
        self._clean_gap = self.config.coasting_clean_every if steady else self.config.clean_every
        speedup = rates[best.source.value][best.k - 1] if best.k else 1.0
        return self._note(plan, "probe" if probe else "neighbour" if neighbour else "model", rates, speedup)

    def _neighbour(self, best: DraftPlan, available: dict[Provenance, int]) -> DraftPlan | None:
        """Now and then draft one token more than the best k (or one fewer, in turn): the costs
        and acceptance of sizes not played go stale, and one bad measurement must not pin k."""
        if not best.k:
            return None
        self._rounds_at_k += 1
        if self._rounds_at_k % self.config.neighbour_every:
            return None
        up = (self._rounds_at_k // self.config.neighbour_every) % 2 == 1
        k = best.k + 1 if up and best.k < available[best.source] else best.k - 1
        return DraftPlan(k, best.source) if k >= 1 else None

    def _standing(
        self,
        available: dict[Provenance, int],
        costs: list[float],
        draft: dict[Provenance, list[float]],
        plain: float,
    ) -> Standing:
        """What the prober reads to decide a probe, as of this full choice."""
        read_rate = self.catch_up_read.value if self.catch_up_read.count else None
        return Standing(
            self.sources, available, self.played, self.since_used, self._best_speedup, self.link,
            self.record, self.overhead.value, costs, draft, plain, read_rate,
            max(self.verify.by_n, default=0),
        )  # fmt: skip

    def _note(
        self,
        plan: DraftPlan,
        why: str,
        rates: dict[str, tuple[float, ...]] | None = None,
        speedup: float = 1.0,
    ) -> DraftPlan:
        self._plan = plan
        self.recheck.noted(plan, why)
        self._last = describe(self, plan, why, rates, speedup)
        return plan

    # -- observing ----------------------------------------------------------------------------

    def observe(self, event: RoundEvent) -> None:
        now = self._clock()
        # a one-time cost (a shape's kernels compiled) prices nothing: see one_time.py
        slow = self.one_time.judge(event, self.one_time.predicted(event, self))
        self.recheck.observed(event, self)
        if self._last_observed is not None:
            self._follow_probe(event, now - self._last_observed, slow is not None)
        if event.overlapped:  # not a pass's own cost: the time between reads, per token
            if self.verify.known() and slow is None:  # the reference: size 1 is exactly one plain step
                self.queued_plain.add(event.verify_seconds / self.verify.plain.value)
            self._since_clean += 1
        else:
            self.queued_plain.close()
            if slow is None and self._last_observed is not None and (event.k or not self.overhead.count):
                # what a speculative round spends outside its passes (its policy work, the
                # confidence, the events): plain steps spend less, and mixed in they made
                # speculation look cheaper than it was; plain is priced by its queued steps
                wall = now - self._last_observed
                self.overhead.add(max(0.0, wall - event.draft_seconds - event.verify_seconds))
            if slow is None:
                self.verify.add(event.k + 1, event.verify_seconds)
                if event.k == 0:
                    self._since_clean = 0
                    step = self.verify.plain.value
                    self.queued_plain.check(self.plain_seconds(step), self._plain_round(step))
                    self._clean_plain = self._plain_in_steps()
        self._last_observed = now
        for s in self.sources:
            self.since_used[s] += 1
        source = event.source
        if LOOKUP in self.acceptance:
            if source is not LOOKUP:
                self._shadows.offer(self._shadow)
            for length, matched in self._shadows.follow(event.emitted):
                self.acceptance[LOOKUP].add(length, matched)
        self._shadow = ()
        if event.hindsight and DRAFT in self.acceptance:
            self.prober.judged(len(event.hindsight), sum(event.hindsight))
            for k, accepted in self.hindsight.judge(event.hindsight):
                self._count(DRAFT, k, accepted, weight=1 / 3)  # starts overlap: a third of a round
        if DRAFT in self.acceptance:
            self.hindsight.follow(event, self.acceptance[DRAFT])
        if event.k == 0 or source not in self.acceptance:
            return
        self.since_used[source] = 0
        self.played[source] += 1
        if source is DRAFT:
            self.prober.judged(min(event.accepted + 1, event.k), event.accepted)
            if self._last.get("why") == "probe":
                self.recheck.after_probe(event, self)
        self._count(source, event.k, event.accepted)
        if slow is not None:
            return
        if source is LOOKUP or event.catch_up <= 1:  # a long catch-up is not a k-token draft's cost
            self.drafting[source].add(event.k, event.draft_seconds)
        elif event.catch_up >= 4 and self.drafting[source].by_n and self.verify.known():
            # what reading one skipped token costs, in plain steps: it decides whether probing
            # a bypassed draft can stay within the budget at all
            plain_round = self._plain_round(self.verify.plain.value)
            usual = self.drafting[source].table(event.k)[-1]
            self.catch_up_read.add(max(0.0, event.draft_seconds - usual) / event.catch_up / plain_round)

    def _plain_round(self, step: float) -> float:
        """A plain round timed alone: the pass and the round's overhead."""
        return self.overhead.value + step

    def plain_seconds(self, step: float) -> float:
        """Plain decoding as a bypass plays it, per token (`QueuedSteps.price`)."""
        return self.queued_plain.price(step, self._plain_round(step))

    def _plain_in_steps(self) -> float:
        """Plain's price in plain steps: what coasting watches, unmoved by the step's own noise."""
        step = self.verify.plain.value
        return self.plain_seconds(step) / step if step > 0 else 0.0

    def _follow_probe(self, event: RoundEvent, wall: float, slow: bool) -> None:
        """Let the prober settle what the last probe really cost, priced at today's plain step;
        not from a round with a one-time cost, which is no probe's cost either."""
        prices = None
        if self.prober.following and self.verify.known() and not slow:
            step = self.verify.plain.value  # the verify table's size 1, without building it
            prices = (self.plain_seconds(step), self._plain_round(step), self.catch_up_read.value)
        self.prober.follow(event, wall, prices)
        if slow:
            self.prober.reset_follow()

    def _count(self, source: Provenance, k: int, accepted: int, weight: float = 1.0) -> None:
        self.acceptance[source].add(k, accepted, weight)
        if source is DRAFT:
            self.record.add(k, accepted, weight)

    def snapshot(self) -> dict[str, object]:
        return dict(self._last)

    def wants_draft_prefill(self) -> bool:
        """Whether the draft should read the prompt with the main even if the answer starts
        bypassed: yes while the draft is unexplored or a close call, so that a probe soon after
        does not pay the whole prompt's catch-up in the middle of the answer."""
        if DRAFT not in self.acceptance:
            return False
        return (
            self.played[DRAFT] < self.config.explore_rounds
            or self._best_speedup.get(DRAFT, 1.0) >= self.config.close_call
        )

    def begin_answer(self) -> None:
        """Keep what was learnt about costs; don't count the pause as overhead; start the
        draft's acceptance from its long-run record, held loosely (a few rounds' weight), since
        a new answer is new text.

        One controller serves every answer of a loaded pair (the worker and the benchmark keep
        it), so only the very first answer pays for exploring. How the last answer ended must
        not decide the next one: a hard stretch at its end kept the draft bypassed through easy
        answers (and on a CPU, where probing a long bypass costs more than its budget, kept it
        out for a whole answer). Halving the last estimates instead handed a useless draft back
        to the prior after a few answers.
        """
        self._last_observed = None
        self.prober.reset_follow()
        self.one_time.begin_answer()
        self._coast = 0
        self._ahead = None
        self._shadows.clear()
        self.hindsight.begin_answer()
        if DRAFT in self.acceptance:
            self.acceptance[DRAFT].restart_from(self.record, rounds=6)
