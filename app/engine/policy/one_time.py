"""One-time costs: a round whose passes took far longer than the controller's price for its shape
is kept out of the cost tables, once per shape.

On a GPU a pass shape's first run compiles kernels: a round of a few tenths of a second once took
38 seconds. Taken into the tables, such a round prices its draft length, or every price kept
against a young plain step, far above what it costs, and a paying draft looks dear. Warm-up
(`warmup.py`) compiles the shapes it knows before anything is timed; this catches the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from app.engine.decoding.events import Provenance, RoundEvent, SlowRound
from app.engine.policy.costs import CostTable, RecentMedian, VerifyCosts

# (source, k, queued, read skipped tokens): what a round's passes compile for. A draft that
# catches up feeds its first step many tokens, another shape than a round of the same k
Shape = tuple[Provenance, int, bool, bool]


class Tables(Protocol):
    """The controller's cost tables that price a round."""

    verify: VerifyCosts
    drafting: dict[Provenance, CostTable]
    catch_up_read: RecentMedian  # per skipped token the draft reads, in plain rounds


def ceiling(by_n: Mapping[int, RecentMedian], n: int) -> float | None:
    """A price for n tokens that a normal pass does not exceed, in the table's unit: the median
    of size n where measured, else the smallest measured size above it, else the largest below
    it scaled up by n over its size (a pass over more tokens never costs less, and never more
    than in proportion). None when nothing is measured.

    Not the controller's own price: that prices a size not yet played low on purpose, so that it
    is tried once (`interpolated_curve`), and a dear size's first real pass would look slow."""
    sizes = sorted(m for m, cost in by_n.items() if cost.count)
    if not sizes:
        return None
    if n in by_n and by_n[n].count:
        return by_n[n].value
    above = [m for m in sizes if m > n]
    if above:
        return by_n[above[0]].value
    return by_n[sizes[-1]].value * n / sizes[-1]


class OneTimeCosts:
    """Judges every timed round against a ceiling on its price; a round `factor` times over it
    and `floor` seconds over it is a one-time cost, left out of the costs, unless its shape was
    excused before (`Shape`). A shape is excused once: a second slow pass of it is its cost (a size that
    really costs more than its neighbours, or a machine that slowed down), and the tables must
    learn it. `factor` None: every round is taken in."""

    def __init__(self, factor: float | None, floor: float) -> None:
        self.factor, self.floor = factor, floor
        self.excused: set[Shape] = set()  # shapes with a round left out: the next slow one counts
        self.left_out = 0  # rounds left out over the controller's life
        self.last: SlowRound | None = None  # the last round judged, if it was left out
        self.position = 0  # answer tokens so far

    def begin_answer(self) -> None:
        self.position, self.last = 0, None

    def predicted(self, event: RoundEvent, tables: Tables) -> float | None:
        """A ceiling on the round's pass seconds (draft and verify) from the controller's
        `tables`, or None before a plain step has been timed (every price is kept against it)."""
        verify, read = tables.verify, tables.catch_up_read
        drafting = tables.drafting.get(event.source) or tables.drafting[Provenance.DRAFT]
        step = verify.plain_step()
        if step is None:
            return None
        if event.overlapped:  # a queued plain step: the time between two reads, at most a step alone
            return step
        verify_units = ceiling(verify.by_n, event.k + 1)
        seconds = (event.k + 1 if verify_units is None else verify_units) * step
        if event.k:
            draft_units = ceiling(drafting.by_n, event.k)
            seconds += (event.k if draft_units is None else draft_units) * step
            if event.catch_up > 1:  # reading the skipped tokens: measured, else a step each
                seconds += event.catch_up * (read.value if read.count else 1.0) * step
        return seconds

    def judge(self, event: RoundEvent, predicted: float | None) -> SlowRound | None:
        """Whether `event` is left out of the costs, as its record (also kept in `last`)."""
        seconds = event.draft_seconds + event.verify_seconds
        shape = (event.source, event.k, event.overlapped, event.catch_up > 1)
        self.last = None
        if (
            self.factor is not None
            and predicted is not None
            and seconds > self.factor * predicted
            and seconds - predicted > self.floor
            and shape not in self.excused
        ):
            self.excused.add(shape)
            self.left_out += 1
            draft_tokens = event.k + event.catch_up if event.source is Provenance.DRAFT else 0
            self.last = SlowRound(
                event.k, event.source, draft_tokens, event.k + 1, self.position, predicted, seconds
            )
        self.position += len(event.emitted)
        return self.last
