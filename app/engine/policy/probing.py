"""How often a bypassed draft is probed, how much of what it skipped a probe reads, and what
a probe really cost: the `Prober` the adaptive controller owns to decide when a source sitting
out is tried again, and the arithmetic behind it.

All costs are in seconds: `extra` is a probe's own passes beyond a plain step, `read` what the
draft's reading one skipped token costs, `budget` the share of a plain round probes may take
(with any close-call premium), `base` the same without it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.engine.decoding.events import Provenance, RoundEvent
from app.engine.decoding.policy import DraftPlan
from app.engine.policy.confidence import ConfidenceLink
from app.engine.policy.config import AdaptiveConfig
from app.engine.policy.costs import RecentMedian, speedups
from app.engine.policy.estimates import AcceptanceCounts

DRAFT, LOOKUP = Provenance.DRAFT, Provenance.LOOKUP
HOPELESS_EVERY = 4096  # rounds between probes of a draft that could not pay even if always right


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


def by_line_above(costs: Sequence[float], measured: int) -> list[float]:
    """`costs` (index n: a verify pass over n tokens) with every size above `measured` priced
    along the table's own slope at that size, which between measured sizes is a straight line;
    unchanged where `measured` is 0 or covers the table."""
    out = list(costs)
    if 0 < measured < len(out) - 1:
        slope = out[measured] - out[measured - 1]
        for n in range(measured + 1, len(out)):
            out[n] = max(out[n], out[measured] + slope * (n - measured))
    return out


@dataclass(frozen=True, slots=True)
class Standing:
    """What the controller knows at a full choice that decides a probe, handed to the prober."""

    sources: Sequence[Provenance]
    available: Mapping[Provenance, int]  # the longest draft each source can play this round
    played: Mapping[Provenance, int]  # real rounds each source has played
    since_used: Mapping[Provenance, int]  # rounds since each source last played
    best_speedup: Mapping[Provenance, float]  # each source's best predicted speedup over plain
    link: ConfidenceLink
    record: AcceptanceCounts  # the draft's long-run acceptance
    overhead: float  # a speculative round's cost outside its passes
    costs: list[float]  # costs[n]: a verify pass over n tokens
    drafting: Mapping[Provenance, list[float]]  # drafting[s][k]: s proposing k tokens
    plain: float  # plain decoding per token, as a bypass plays it
    read_rate: float | None  # the draft's reading one skipped token, in plain rounds (None: unknown)
    verified_up_to: int = 0  # the largest verify size measured (0: as `costs` says, unchecked)


class Prober:
    """Probe scheduling for the adaptive controller, which owns it and passes it its `Standing`.

    Its own state: when the next probe is due, what probes really cost, and how many of the
    draft's proposals were judged and how many were right (thin evidence keeps probes coming,
    a draft never right gets a thinner share of the budget)."""

    def __init__(self, config: AdaptiveConfig) -> None:
        self.config = config
        self.due = 0  # rounds a source may sit out before a probe, as of the last full choice
        self.extra = RecentMedian(5)  # a probe's measured cost beyond plain (`follow`)
        self.paid = RecentMedian(5)  # the same with its catch-up read: what a probe really took
        # probes in a row whose every proposal was right and after which the draft stayed out:
        # the draft is dear, not the text hard, and more blind probes cannot change that
        self.fruitless = 0
        self.verdicts, self.verdict_hits = 0, 0  # the draft's proposals judged, and right
        self._wall: float | None = None  # the last round's wall time, when it was a probe
        self._read = 0  # the tokens that probe read
        self._right = False  # whether every token that probe proposed was right

    def judged(self, verdicts: int, hits: int) -> None:
        """Count the draft's proposals judged (in rounds or in hindsight) and those right."""
        self.verdicts += verdicts
        self.verdict_hits += hits

    def reset_follow(self) -> None:
        """A new answer: the pause before it is not a probe's cost."""
        self._wall = None

    @staticmethod
    def _best_speedup(
        at: Standing, costs: list[float], up_to: int, draft: list[float], tokens: Sequence[float]
    ) -> float:
        """The draft's best speedup over plain as a bypass plays it (the choice's own measure),
        were a round drafting k tokens worth `tokens[k]`: by its long-run record, whether probing
        a bypassed draft is worth reading what it skipped; if always right, whether any probe can
        change the verdict. `costs` are the verify prices with sizes above those measured priced
        along the line through the largest (`by_line_above`): the choice prices them as cheap as
        they could be so that it tries them, but a probe plays `probe_k` and never measures them
        (on an H100, a 4-bit 7B pair's verify of 7-9 tokens priced as one of 4 made a draft that
        never paid "pay" by its record at k = 6-8, and blind probes read 56-77 skipped tokens in
        answer after answer: docs/measurements/2026-11-26-probe-prices.md)."""
        return max(speedups(tokens, at.plain, at.overhead, draft, costs, up_to))

    def probe(self, best: DraftPlan, at: Standing) -> DraftPlan | None:
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
        config, link, costs, available, draft = self.config, at.link, at.costs, at.available, at.drafting
        plain_round = at.overhead + costs[1]  # a plain round timed alone
        lined = by_line_above(costs, at.verified_up_to)  # as the prober's speedups price verifies
        read = at.read_rate * plain_round if at.read_rate is not None else 0.0
        for s in at.sources:
            if s is best.source or s is LOOKUP or not available[s]:  # lookup is scored every round
                continue
            k = min(config.probe_k, available[s])
            passes = draft[s][k] + costs[k + 1] - costs[1]
            extra = max(passes, self.extra.value)
            measured = self.paid.value  # whole probes as measured, their reads included (0: none yet)
            # of plain decoding as played (queued): the round overhead is a speculative round's
            base = budget = config.probe_budget / sum(s is not LOOKUP for s in at.sources) * at.plain
            close = at.best_speedup.get(s, 0.0) >= config.close_call
            if close:
                budget *= 4
            # one unlucky round is thin evidence: recheck soon, unless a probe costs several
            # plain steps (then the budget decides, as for any probe). So are fewer verdicts than
            # the link needs, since without it only a probe can call the draft back (one met on a
            # poem's first rounds was not probed again through the code answer after): rechecked
            # until the link has them, or twice that where the loop gives no confidence, unless
            # the draft was never once right (a random-weight draft, which would only pay probes)
            limit, share = None, self.share(s, link)
            learning = (
                s is DRAFT
                and self.verdict_hits > 0
                and link.seen < link.minimum_seen
                and self.verdicts < 2 * link.minimum_seen
            )
            # priced as a bypass pays it: its passes, and the plain round after it, which no queued
            # step hides, against plain steps as played (on an H100, 4-bit 7B, the passes alone
            # said 2 steps timed alone where it cost 3.5 queued ones, and rechecks every 8 rounds
            # cost a fresh pair's first answer 9%)
            paid = max(passes + plain_round - at.plain, self.extra.value)
            # once a probe right on all it proposed left the draft out (the recheck had its chance
            # to replay prices caught in a stall), a draft that would not pay even if always right
            # waits for prices to move, which they do slowly: a probe now and then, reading a
            # window (on an H100 a 4-bit 7B pair's draft step cost 0.6 of a plain step, and blind
            # probes every answer cost those answers 5-15%)
            hopeless = (
                s is DRAFT
                and self.fruitless > 0
                and self._best_speedup(at, lined, available[s], draft[s], range(1, available[s] + 2))
                < config.margin
            )
            if hopeless:
                interval, limit = HOPELESS_EVERY, config.probe_read
            elif (at.played[s] < 3 or learning) and paid <= 2 * at.plain:
                interval = 8
            elif (
                s is DRAFT
                and not link.informative()
                and (
                    self.fruitless < 1
                    or measured <= budget * max(config.close_probe_every, math.ceil(extra / budget))
                )
                and self._best_speedup(at, lined, available[s], draft[s], at.record.tokens(available[s]))
                >= 1.0
            ):
                # reads all it skipped: its hindsight over the whole stretch is what corrects
                # the record (reading only a window, the record learns too little per probe
                # and blind probes go on through hard answers); not once a probe right on all
                # it proposed left the draft out and whole probes, as measured, cost more than
                # this spacing affords (an H100's 4-bit draft, right on 90% but dear: reads of
                # 36-193 skipped tokens made probes of 8-25 plain steps, one every answer)
                interval = max(config.close_probe_every, math.ceil(extra / budget))
            else:
                floor = config.close_probe_every if close else 4
                interval = affordable_interval(extra, read, budget, base, floor, config.probe_read)
                # until reading has a price, a probe learns it from a window rather than paying for
                # the whole stretch at an unknown rate (on a CPU reading a long bypass costs
                # several plain steps)
                limit = (
                    read_limit(at.since_used[s], extra, read, budget, base * share, config.probe_read)
                    if at.read_rate is not None
                    else config.probe_read
                )
                # never closer than whole probes as measured afford: the model above prices a
                # read per token, where a GPU pays mostly per pass
                interval = max(interval, math.ceil(measured / budget))
            interval = math.ceil(interval / share)
            # probes never stop: every 512 rounds at the least, or as far apart as their measured
            # cost needs to keep within the budget (up to 4096 rounds)
            cap = HOPELESS_EVERY if hopeless else min(max(512, math.ceil(measured / budget)), HOPELESS_EVERY)
            self.due = min(self.due, interval, cap)
            if at.since_used[s] >= min(interval, cap):
                return DraftPlan(k, s, limit)
        return None

    def share(self, source: Provenance, link: ConfidenceLink) -> float:
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
        judged = 2 * link.minimum_seen
        return min(1.0, judged * (self.verdict_hits + 1) / max(self.verdicts, 1))

    def follow(self, event: RoundEvent, wall: float, prices: tuple[float, float, float] | None) -> None:
        """What a probe really cost beyond the plain steps it stood in for: its round and, if the
        draft stays out, the next (the plain steps' queue starts again after it, with a full
        choice), less reading the skipped tokens (priced apart). Pricing a probe by its passes
        alone misses the restarted queue, and a useless draft's probes then overspend the
        budget (docs/measurements/2026-11-23-probe-costs-h200.md).

        `wall` is the round's wall time; `prices`, once the verify costs are known and while
        `following`: plain decoding per token as played, a plain round timed alone, and reading
        one skipped token in plain rounds."""
        if self._wall is not None and prices is not None:
            plain, plain_round, read_rate = prices
            read = self._read * read_rate * plain_round
            after = wall - plain if event.k == 0 else 0.0  # the draft resumed: no queue to restart
            self.extra.add(max(0.0, self._wall - plain + after - read))
            self.paid.add(max(0.0, self._wall - plain + after))
            self.fruitless = self.fruitless + 1 if event.k == 0 and self._right else 0
        self._wall, self._read = None, 0
        if event.k and event.policy.get("why") == "probe":
            self._wall, self._read = wall, event.catch_up
            self._right = event.accepted == event.k

    @property
    def following(self) -> bool:
        """Whether the last round was a probe, whose cost this round's wall time settles."""
        return self._wall is not None
