"""How often a bypassed draft is probed, how much of what it skipped a probe reads, and what
a probe really cost: the half of `AdaptiveDraftLength` that decides when a source sitting out
is tried again (`Probing`), and the arithmetic behind it.

All costs are in seconds: `extra` is a probe's own passes beyond a plain step, `read` what the
draft's reading one skipped token costs, `budget` the share of a plain round probes may take
(with any close-call premium), `base` the same without it.
"""

from __future__ import annotations

import math

from app.engine.decoding.events import Provenance, RoundEvent
from app.engine.decoding.policy import DraftPlan
from app.engine.policy.confidence import ConfidenceLink
from app.engine.policy.costs import QueuedSteps, RecentMedian, VerifyCosts
from app.engine.policy.estimates import AcceptanceCounts

DRAFT, LOOKUP = Provenance.DRAFT, Provenance.LOOKUP


def affordable_interval(
    extra: float, read: float, budget: float, base: float, floor: int, probe_read: int
) -> int:
    """The fewest bypassed rounds after which a probe fits the budget: its extra passes plus
    reading the skipped tokens; where that takes more than twice as long as reading only the
    last `probe_read` of them, the probe reads those, within the `base` budget (no close-call
    premium: a gap costs the draft context, so such a probe undersells the draft;
    docs/measurements/2026-11-23-probe-gaps.md)."""
    windowed = max(floor, probe_read, math.ceil((extra + probe_read * read) / base))
    if budget > read:
        full = max(floor, math.ceil(extra / (budget - read)))
        if full <= max(probe_read, 2 * windowed):
            return full
    return windowed


def read_limit(
    skipped: int, extra: float, read: float, budget: float, base: float, probe_read: int
) -> int | None:
    """How many of the `skipped` tokens a probe reads: all (None) where `budget` affords it,
    else as many as the `base` budget of the rounds since the draft's last use affords, and
    at least `probe_read`."""
    if read <= 0.0 or skipped * budget - extra >= skipped * read:
        return None
    return max(probe_read, int((skipped * base - extra) / read))


class Probing:
    """Probe scheduling for the adaptive controller, which owns every attribute named here."""

    sources: list[Provenance]
    played: dict[Provenance, int]
    verdicts: int
    verdict_hits: int
    since_used: dict[Provenance, int]
    record: AcceptanceCounts
    link: ConfidenceLink
    verify: VerifyCosts
    overhead: RecentMedian
    queued_plain: QueuedSteps
    catch_up_read: RecentMedian  # per skipped token the draft reads, in plain rounds
    probe_extra: RecentMedian  # a probe's measured cost beyond plain (_follow_probe)
    probe_k: int
    probe_budget: float
    probe_read: int
    close_call: float
    close_probe_every: int
    _best_speedup: dict[Provenance, float]
    _probe_due: int
    _probe_wall: float | None
    _probe_read: int

    def _plain_round(self, step: float) -> float:
        """A plain round timed alone: the pass and the round's overhead."""
        return self.overhead.value + step

    def _speedup_by_record(
        self, up_to: int, costs: list[float], draft: list[float], plain_round: float
    ) -> float:
        """The draft's best speedup if the text were as its long-run record: whether probing a
        bypassed draft is worth reading what it skipped."""
        tokens, overhead = self.record.tokens(up_to), self.overhead.value
        return (
            max(tokens[k] / (overhead + draft[k] + costs[k + 1]) for k in range(1, up_to + 1)) * plain_round
        )

    def _probe(
        self,
        best: DraftPlan,
        available: dict[Provenance, int],
        costs: list[float],
        draft: dict[Provenance, list[float]],
        plain: float,
    ) -> DraftPlan | None:
        """Try a source unused for long enough that its probes stay within the budget.

        A probe after I bypassed rounds costs its own extra passes plus the draft reading the I
        skipped tokens. Where reading is cheap (a GPU) the spacing just makes the first part
        small; where every token read costs a share of a step (a CPU), that share alone can
        exceed the budget, and no spacing would keep probes within it: there the probe reads
        only the last tokens the budget affords (at least `probe_read`) and skips the rest,
        leaving a gap in the draft's context, so that every draft is probed now and then at a
        bounded cost. Otherwise such a draft would never be probed again unless the main's
        confidence (ConfidenceLink) called it back, and a few costly rounds at the start of a
        pair's first answer could keep a paying draft out for good.
        Without the link's signal (not yet learnt, or one that does not tell hits from misses),
        a draft whose long-run record says it pays is probed every dozen rounds or wider
        whatever reading costs: on prose the draft cannot help with those blind probes are a
        real cost, but without them a draft bypassed over a hard stretch would sit out the rest
        of the answer."""
        plain_round = self._plain_round(costs[1])
        read = self.catch_up_read.value * plain_round if self.catch_up_read.count else 0.0
        for s in self.sources:
            if s is best.source or s is LOOKUP or not available[s]:  # lookup is scored every round
                continue
            k = min(self.probe_k, available[s])
            extra = max(draft[s][k] + costs[k + 1] - costs[1], self.probe_extra.value)
            # of plain decoding as played (queued): the round overhead is a speculative round's
            base = budget = self.probe_budget / sum(s is not LOOKUP for s in self.sources) * plain
            close = self._best_speedup.get(s, 0.0) >= self.close_call
            if close:
                budget *= 4
            # one unlucky round is thin evidence: recheck soon, unless a probe costs several
            # plain steps (then the budget decides, as for any probe). So are fewer verdicts than
            # the link needs, since without it only a probe can call the draft back (one judged on
            # a poem's first rounds would sit out the code answer after it): rechecked
            # until the link has them, or twice that where the loop gives no confidence, unless
            # the draft was never once right (a random-weight draft, which would only pay probes)
            limit, share = None, self._probe_share(s)
            learning = (
                s is DRAFT
                and self.verdict_hits > 0
                and self.link.seen < self.link.minimum_seen
                and self.verdicts < 2 * self.link.minimum_seen
            )
            if (self.played[s] < 3 or learning) and extra <= 2 * plain_round:
                interval = 8
            elif (
                s is DRAFT
                and not self.link.informative()
                and self._speedup_by_record(available[s], costs, draft[s], plain_round) >= 1.0
            ):
                # reads all it skipped: its hindsight over the whole stretch is what corrects
                # the record (reading only a window, the record learns too little per probe
                # and blind probes go on through hard answers)
                interval = max(self.close_probe_every, math.ceil(extra / budget))
            else:
                interval = affordable_interval(
                    extra, read, budget, base, self.close_probe_every if close else 4, self.probe_read
                )
                # until reading has a price, a probe learns it from a window rather than paying for
                # the whole stretch at an unknown rate (on a CPU reading a long bypass costs
                # several plain steps)
                limit = (
                    read_limit(self.since_used[s], extra, read, budget, base * share, self.probe_read)
                    if self.catch_up_read.count
                    else self.probe_read
                )
            interval = math.ceil(interval / share)
            self._probe_due = min(self._probe_due, interval, 512)
            if self.since_used[s] >= min(interval, 512):
                return DraftPlan(k, s, limit)
        return None

    def _probe_share(self, source: Provenance) -> float:
        """The share of the probe budget a source keeps (its probes come that much more rarely,
        and where reading all it skipped is beyond the budget, it reads that much less): all of
        it, unless it is a draft right on fewer than one in `2 * minimum_seen` (48) of the
        proposals judged so far, which keeps a share in proportion. Such a draft (random
        weights, a mismatched tokenizer) has never shown a stretch where it pays, and a real
        draft is right on a third of even a poem's tokens, while a random-weight draft's probes,
        even within the full budget, are pure loss against plain decoding. Probes never stop
        (every 512 rounds at the least), and a few hits restore the full budget."""
        if source is not DRAFT:
            return 1.0
        judged = 2 * self.link.minimum_seen
        return min(1.0, judged * (self.verdict_hits + 1) / max(self.verdicts, 1))

    def _plain_seconds(self, step: float) -> float:
        """Plain decoding as a bypass plays it, per token: queued steps where they were seen."""
        return self.queued_plain.value * step if self.queued_plain.rounds >= 3 else self._plain_round(step)

    def _follow_probe(self, event: RoundEvent, wall: float) -> None:
        """What a probe really cost beyond the plain steps it stood in for: its round and, if the
        draft stays out, the next (the plain steps' queue starts again after it, with a full
        choice), less reading the skipped tokens (priced apart). Pricing a probe by its passes
        alone misses the restarted queue, and a useless draft's probes then overspend the
        budget (docs/measurements/2026-11-23-probe-costs-h200.md)."""
        if self._probe_wall is not None and self.verify.known():
            step = self.verify.plain.value  # the verify table's size 1, without building it
            read = self._probe_read * self.catch_up_read.value * self._plain_round(step)
            plain = self._plain_seconds(step)
            after = wall - plain if event.k == 0 else 0.0  # the draft resumed: no queue to restart
            self.probe_extra.add(max(0.0, self._probe_wall - plain + after - read))
        self._probe_wall, self._probe_read = None, 0
        if event.k and event.policy.get("why") == "probe":
            self._probe_wall, self._probe_read = wall, event.catch_up
