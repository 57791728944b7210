"""What a pass costs on this machine, measured: per size where played, fitted or interpolated elsewhere.

Shared by the adaptive controller (which keeps costs as they are measured, round by round) and the
benchmark's oracle (which prices every fixed k from a whole prompt's rounds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence


class RecentMedian:
    """Median of the last `window` samples: robust to the bursts in which another process takes
    the CPU or GPU, which would otherwise inflate one cost and flip the choice of k. Not a lower
    quantile: some slow passes are the cost itself (MLX's CUDA backend builds an attention graph
    for every new sequence length, so most multi-token passes there pay it), and a low quantile
    would price those passes at the rare cheap one."""

    def __init__(self, window: int = 15) -> None:
        self.samples: list[float] = []
        self.window, self.count, self.value = window, 0, 0.0

    def add(self, x: float) -> bool:
        """Take a sample; whether the median moved."""
        before = self.value
        if self.count == 1 and self.samples and self.samples[0] > x:
            # the first pass at a new size can carry one-time costs (a kernel compiled for the
            # new shape, several times the pass on a GPU): the second, cheaper one replaces
            # it, where a median of the two would keep half of that cost
            self.samples.clear()
        self.samples.append(x)
        if len(self.samples) > self.window:
            del self.samples[0]
        self.count += 1
        self.refresh()
        return self.value != before or self.count == 1

    def scale(self, factor: float) -> None:
        """Every sample times `factor` (its unit changed)."""
        self.samples = [x * factor for x in self.samples]
        self.refresh()

    def refresh(self) -> None:
        """The median of the samples kept (after they were set from a saved state)."""
        ordered = sorted(self.samples)
        mid = len(ordered) // 2
        if not ordered:
            self.value = 0.0
        else:
            self.value = ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


class QueuedSteps:
    """Per-token time of queued plain steps, as the median of the means of stretches of
    consecutive ones. A queued round's time is the time between two reads, and one read can
    wait for two passes: on a GPU the first read of a stretch waits for the pass queued
    behind it, and the next read almost not at all. One round says nothing; a stretch's
    mean is the speed, and a median of single rounds picks either end of such pairs, which
    can price a paying draft under plain. A run's last read finds its pass done: a remainder of
    one after a stretch of eight was a sample of a fifth of a step, and priced plain at a quarter
    of its cost on an H100, so a remainder under half a stretch joins the stretch before it."""

    def __init__(self, stretch: int = 8, window: int = 5) -> None:
        # a stretch's mean already smooths a burst: five of them follow a machine that slowed
        # within three stretches (24 rounds), where fifteen took sixty
        self.stretch = stretch  # a stretch this long is closed as one sample
        self.means = RecentMedian(window)
        self.rounds = 0  # every queued round seen
        self._sum, self._n = 0.0, 0
        self._cut = 0  # rounds of the stretch just cut from a run going on (the last mean)

    def add(self, x: float) -> None:
        self.rounds += 1
        self._sum += x
        self._n += 1
        if self._n >= self.stretch:
            cut = self._n
            self.close()
            self._cut = cut

    def rebase(self, factor: float) -> None:
        """Kept in multiples of the plain step: see VerifyCosts.young."""
        self.means.scale(factor)
        self._sum *= factor

    def clear(self) -> None:
        """Forget every stretch (found stale): priced again from the next queued rounds."""
        self.means = RecentMedian(self.means.window)
        self.rounds, self._sum, self._n, self._cut = 0, 0.0, 0, 0

    def check(self, queued: float, alone: float) -> None:
        """Drop the price when `queued` (plain decoding as queued steps, per token) costs more than
        half again `alone` (a plain step timed alone, with the round's overhead): that says it is
        stale, and it is learnt again. Queued steps are timed only while the draft sits out, so
        nothing else corrects it: a price set in a slow minute would let a useless draft,
        predicted to pay, draft through whole answers
        (docs/measurements/2026-11-23-probe-costs-h200.md). Half again, not a noisy stretch:
        clearing restarts the price, and each move of it ends coasting (a full choice every
        round, which costs Python time)."""
        if queued > 1.5 * alone:  # only where queued steps were seen
            self.clear()

    def close(self) -> None:
        """The stretch ended (a round that was not queued came, or it is a stretch long)."""
        if self._n and self._cut and 2 * self._n < self.stretch and self.means.samples:
            total = self.means.samples[-1] * self._cut + self._sum
            self.means.samples[-1] = total / (self._cut + self._n)
            self.means.refresh()
        elif self._n:
            self.means.add(self._sum / self._n)
        self._sum, self._n, self._cut = 0.0, 0, 0

    @property
    def value(self) -> float:
        """Closed stretches' median; before any, the open stretch's mean."""
        if self.means.count:
            return self.means.value
        return self._sum / self._n if self._n else 0.0

    def price(self, step: float, alone: float) -> float:
        """Plain decoding per token in seconds, `step` the plain step and `alone` a plain round
        timed alone: queued steps where 3 were seen, never dearer than `alone` unless every
        stretch of a full window says so, and then priced at the least dear of them. Queueing
        only hides a sync. A shared host stalls steps in bursts: one stretch caught in a stall
        kept a losing draft in for six answers (docs/measurements/2026-11-26-gpu-bench-repeated.md),
        and three of five drew it in mid-answer to read 138 skipped tokens
        (docs/measurements/2026-11-26-host-stalls.md). A machine that really slowed lifts them all."""
        queued = self.value * step
        if self.rounds < 3:
            return alone
        if queued <= alone:
            return queued
        window = self.means.samples
        if len(window) < self.means.window or min(window) * step <= alone:
            return alone
        return min(window) * step


def speedups(
    tokens: Sequence[float],
    plain: float,
    overhead: float,
    draft: Sequence[float],
    costs: Sequence[float],
    up_to: int,
) -> list[float]:
    """Speedup over plain for k = 1..up_to: a round drafting k tokens yields `tokens[k]` for its
    overhead, `draft[k]` and a verify pass over k + 1 tokens (`costs[k + 1]`), against `plain`
    seconds per token: how the choice and the prober both price a draft length."""
    return [tokens[k] * plain / (overhead + draft[k] + costs[k + 1]) for k in range(1, up_to + 1)]


class LineSums:
    """Sums of a weighted least-squares line's points, so that one point can be taken out again
    (the check of each single-sample size against the others) without refitting from scratch."""

    __slots__ = ("points", "w", "wn", "wnn", "wnv", "wv")

    def __init__(self, points: Iterable[tuple[int, float, float]] = ()) -> None:
        self.points, self.w, self.wn, self.wv, self.wnn, self.wnv = 0, 0.0, 0.0, 0.0, 0.0, 0.0
        for n, v, c in points:
            self.add(n, v, c)

    def add(self, n: int, v: float, c: float, sign: int = 1) -> None:
        self.points += sign
        c *= sign
        self.w += c
        self.wn += c * n
        self.wv += c * v
        self.wnn += c * n * n
        self.wnv += c * n * v

    def line(self) -> tuple[float, float]:
        """(intercept, slope >= 0); proportional to n while only one size is in."""
        if self.points == 1:
            return 0.0, self.wv / self.wn
        mean_n, mean_v = self.wn / self.w, self.wv / self.w
        var = self.wnn - self.w * mean_n * mean_n
        slope = (self.wnv - self.w * mean_n * mean_v) / var if var > 1e-9 * self.wnn else 0.0
        slope = max(slope, 0.0)
        return mean_v - slope * mean_n, slope


def fit_line(points: list[tuple[int, float, float]]) -> tuple[float, float]:
    """(intercept, slope >= 0) of the weighted least-squares line through (n, cost, weight);
    proportional to n while only one size is measured."""
    return LineSums(points).line()


def _rising(prices: list[float], scale: float) -> list[float]:
    """`prices` times `scale`, made non-decreasing (a pass over more tokens never costs less)
    by lowering a size that costs more than a larger one, never by raising the larger one;
    the first size (in the verify table the plain step, the reference) stays as it is.

    A price too high keeps its size from being played, so nothing corrects it; one too low is
    played and measured. Raising instead lets one stale size, timed while the machine was
    slow and not played since, hold every larger size up, so a paying k is bypassed for good
    (docs/measurements/2026-11-23-price-drift.md)."""
    out, ceiling = [0.0] * len(prices), math.inf
    for n in range(len(prices) - 1, -1, -1):
        ceiling = min(ceiling, prices[n] * scale)
        out[n] = ceiling
    if out:
        out[0] = prices[0] * scale
        for n in range(1, len(out)):
            out[n] = max(out[n], out[0])
    return out


def cost_curve(
    measured: dict[int, float], line: tuple[float, float], up_to: int, scale: float = 1.0
) -> list[float]:
    """Cost for n = 1..up_to: the measurement where there is one, the line elsewhere, times
    `scale`, made non-decreasing in n."""
    base, slope = line
    return _rising([measured.get(n, base + slope * n) for n in range(1, up_to + 1)], scale)


def interpolated_curve(measured: dict[int, float], up_to: int, scale: float = 1.0) -> list[float]:
    """Cost for n = 1..up_to: measurements where there are some, straight lines between them,
    and beyond the largest measured size the cheapest it could be (that size's cost, since a
    pass over more tokens never costs less). A global line would misprice a cost that grows in
    steps (on a CPU a few more tokens can cost a jump, then nothing) and keep the
    controller from ever trying the far sizes; this optimism prices a size never measured so
    that it is tried once where it could win, and then its measurement decides."""
    sizes = sorted(measured)
    prices, i = [], 0  # sizes[i] is the smallest measured size >= n, while there is one
    for n in range(1, up_to + 1):
        while i < len(sizes) and sizes[i] < n:
            i += 1
        if i == len(sizes):  # above every measured size
            value = measured[sizes[-1]]
        elif sizes[i] == n:
            value = measured[n]
        elif i == 0:  # below every measured size
            value = measured[sizes[0]] * n / sizes[0]
        else:
            a, b = sizes[i - 1], sizes[i]
            value = measured[a] + (measured[b] - measured[a]) * (n - a) / (b - a)
        prices.append(value)
    return _rising(prices, scale)


class CostTable:
    """Seconds of an operation over n tokens (a verify pass, a k-token draft): the median of
    the measurements per n; where unmeasured, fitted by weighted least squares, or with
    `optimistic`, interpolated between measured sizes and priced low above them.

    With a `reference` (the current cost of a plain step) every sample is kept as a multiple of
    the reference at the time it was taken, and read back times the reference now. A machine
    that speeds up or slows down (another process, thermals, a longer context) moves every
    size's cost at once, so a size not played for a while does not keep the price of an older,
    slower moment, which could keep a paying draft bypassed.
    """

    def __init__(
        self, reference: Callable[[], float | None] | None = None, *, optimistic: bool = False
    ) -> None:
        self.by_n: dict[int, RecentMedian] = {}
        self.optimistic = optimistic  # interpolate, and price unmeasured larger sizes low
        self.one_time_factor = 2.0  # a single pass this far above the other sizes' line is suspect
        self._reference = reference
        self._pending: list[tuple[int, float]] = []  # taken before any reference existed
        # curves in multiples of the reference, per size: a new reference (every plain step
        # while the draft is bypassed) rescales them without recomputing them
        self._tables: dict[int, list[float]] = {}

    def _ref(self) -> float | None:
        return self._reference() if self._reference is not None else 1.0

    def _flush(self, ref: float | None) -> None:
        if ref and self._pending:
            for n, seconds in self._pending:
                self.by_n.setdefault(n, RecentMedian()).add(seconds / ref)
            self._pending.clear()
            self._tables.clear()

    def add(self, n: int, seconds: float) -> None:
        ref = self._ref()
        self._flush(ref)
        if not ref:
            self._pending.append((n, seconds))
            return
        cost = self.by_n.setdefault(n, RecentMedian())
        if cost.add(seconds / ref) or cost.count <= 8:  # a new price, or a new weight in the fit
            self._tables.clear()

    def rebase(self, factor: float) -> None:
        """Every price times `factor`: the reference it is kept against was corrected."""
        for m in self.by_n.values():
            m.scale(factor)
        self._tables.clear()

    def forget(self, n: int) -> None:
        """Drop size n's measurements (another moment's): the next passes price it."""
        if self.by_n.pop(n, None) is not None:
            self._tables.clear()

    def replace(self, by_n: dict[int, RecentMedian]) -> None:
        """Take these measurements instead (a saved state)."""
        self.by_n, self._pending = by_n, []
        self._tables.clear()

    def known(self) -> bool:
        self._flush(self._ref())
        return len(self.by_n) >= 2

    def measured(self) -> dict[int, float]:
        """Current estimates, in seconds, for the sizes measured."""
        ref = self._ref() or 0.0
        return {n: m.value * ref for n, m in sorted(self.by_n.items())}

    def table(self, up_to: int) -> list[float]:
        """Estimated cost for n = 1..up_to, in seconds, made non-decreasing in n."""
        ref = self._ref()
        self._flush(ref)
        if not self.by_n or not ref:
            return [0.0] * up_to
        unit = self._tables.get(up_to)
        if unit is None:
            unit = self._curve(up_to)
            self._tables[up_to] = unit
        return [price * ref for price in unit]

    def _curve(self, up_to: int) -> list[float]:
        """Unit prices for n = 1..up_to from the sizes measured."""
        measured = {n: m.value for n, m in self.by_n.items()}
        single = [n for n, m in self.by_n.items() if m.count == 1] if len(measured) > 1 else []
        if self.optimistic and not single:
            return interpolated_curve(measured, up_to)
        weights = {n: min(m.count, 8) for n, m in self.by_n.items()}
        sums = LineSums([(n, measured[n], weights[n]) for n in measured])
        for n in single:
            # one pass far above what the other sizes say may be a first pass's one-time cost:
            # held at their line until a second pass confirms it. Taken at face value, one such
            # pass prices every larger k under plain, those sizes are never played, and so
            # their price never comes down
            value, weight = measured[n], weights[n]
            sums.add(n, value, weight, -1)
            base, slope = sums.line()
            expected = max(0.0, base) + slope * n
            if value > self.one_time_factor * expected:
                measured[n] = value = expected
            sums.add(n, value, weight)
        if self.optimistic:
            return interpolated_curve(measured, up_to)
        base, slope = sums.line()
        return cost_curve(measured, (max(0.0, base), slope), up_to)


class VerifyCosts(CostTable):
    """Verify passes: n = 1 (a plain step) is kept in seconds and is the reference for the rest.

    While the reference rests on fewer than `young` plain steps, a move of its median is a
    correction, not the machine changing speed: every price kept against it (here and in
    `followers`, which share it) keeps its seconds. Plain steps are rare while the draft pays
    (an answer's last token), so the reference can be a median of two or three for several
    answers; one fast step among them would inflate every price stored against it, for good
    once the median settled, and price a paying draft under plain."""

    young = 8

    def __init__(self) -> None:
        super().__init__(reference=self.plain_step, optimistic=True)
        self.plain = RecentMedian()
        self.followers: list[CostTable | QueuedSteps] = []

    def plain_step(self) -> float | None:
        return self.plain.value if self.plain.count else None

    def add(self, n: int, seconds: float) -> None:
        if n == 1:  # the reference itself
            before = self.plain.value if self.plain.count else 0.0
            self.plain.add(seconds)
            if before and self.plain.count <= self.young and self.plain.value != before:
                factor = before / self.plain.value
                for table in (self, *self.followers):
                    table.rebase(factor)
            one = self._one_from_plain()  # size 1 is one plain step again, whatever was rescaled
            self._flush(self.plain.value)
            if (
                one.count <= 8
            ):  # a new size, or its weight in the fit; later plain steps only move the reference
                self._tables.clear()
            return
        super().add(n, seconds)

    def replace(self, by_n: dict[int, RecentMedian]) -> None:
        super().replace(by_n)
        if 1 in self.by_n:
            self._one_from_plain()

    def _one_from_plain(self) -> RecentMedian:
        """Size 1 is exactly 1x the reference, weighted by how many plain steps were measured."""
        one = self.by_n.get(1)
        if one is None:
            one = self.by_n[1] = RecentMedian()
        one.samples, one.value, one.count = [1.0], 1.0, self.plain.count
        return one
