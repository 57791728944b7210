"""The speed gate: the adaptive controller against plain, every fixed draft length, a per-answer
hindsight oracle and a simple reference policy, over a grid of simulated pairs, on simulated time.

Each cell is a pair (how often the draft is right and how, what a draft token costs, how the
main's verify pass grows with its length) and an answer length; 20 answers go through one cold
controller, as the app keeps one per pair. Everything is seeded, so the gate gives the same
numbers on every machine and every run: a change to the controller is judged without timing
noise. `python -m lab.replay.gate` prints the table; the test in `tests/lab/replay` holds it to
the targets below.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from itertools import takewhile
from pathlib import Path

from app.engine.decoding.policy import MAX_DRAFT
from app.engine.policy.adaptive import AdaptiveDraftLength
from app.engine.policy.settings import ControllerSettings
from lab.replay.simulate import CostModel, SimulatedClock, Trace, load_traces, replay

ALPHAS = (0.3, 0.5, 0.7, 0.85, 0.95)  # the draft's share of right guesses
DRAFT_COSTS = (0.05, 0.15, 0.3, 0.6, 0.9)  # a draft token's cost, in plain steps of the main
SHAPES = ("compute", "bandwidth", "gpu-4bit", "flat-14b")  # CostModel.shaped
LENGTHS = (32, 128, 512)  # answer tokens
ANSWERS = 20  # per cell, through one controller
NOISE = 0.1  # log-normal spread of every simulated pass
KS = tuple(range(1, 9))  # the fixed draft lengths the controller is held against
BURST = 0.5  # bursty traces: P(right | right) - P(right | wrong), the same mean as independent ones
RECORDED = Path(__file__).resolve().parents[2] / "tests" / "engine" / "data" / "qwen_coder_traces.json"

# the targets: where some fixed k beats plain by PAYS, adaptive keeps LONG (answers of 128 tokens
# and more) or SHORT of the best fixed k; where none does, NO_PAY of plain; a cold controller's
# first answer keeps FIRST of the best fixed k where drafting pays
PAYS, LONG, SHORT, NO_PAY, FIRST = 1.10, 0.97, 0.92, 0.98, 0.90


@dataclass(frozen=True, slots=True)
class Cell:
    """One pair and answer length of the grid; `alpha` 0 marks the recorded answers."""

    shape: str
    draft_cost: float
    alpha: float
    bursty: bool
    length: int

    @property
    def name(self) -> str:
        kind = "recorded" if not self.alpha else f"a{self.alpha:g}{'b' if self.bursty else 'i'}"
        return f"{self.shape} c{self.draft_cost:g} {kind} n{self.length}"

    def costs(self) -> CostModel:
        shape = CostModel.shaped(self.shape, noise=NOISE)
        return replace(shape, draft_step=self.draft_cost * shape.verify[0])

    def traces(self) -> list[Trace]:
        if not self.alpha:
            recorded, _ = load_traces(RECORDED)
            return [recorded[i % len(recorded)] for i in range(ANSWERS)]
        rng = random.Random(f"{self.alpha} {self.bursty} {self.length}")
        return [synthetic_trace(self.alpha, self.bursty, self.length, rng) for _ in range(ANSWERS)]


def synthetic_trace(alpha: float, bursty: bool, length: int, rng: random.Random) -> Trace:
    """An answer whose draft is right with probability `alpha` per token: independently, or in
    runs (a two-state chain with the same mean, as in real text, where a draft is right on
    whole phrases and wrong on whole others)."""
    if bursty:
        after_miss = alpha * (1 - BURST)
        after_hit = after_miss + BURST
        hit = rng.random() < alpha
        hits = []
        for _ in range(length):
            hits.append(hit)
            hit = rng.random() < (after_hit if hit else after_miss)
    else:
        hits = [rng.random() < alpha for _ in range(length)]
    return Trace((1, 2, 3), tuple(rng.sample(range(1000, 100_000), length)), tuple(hits))


def play(
    hits: Sequence[bool], costs: CostModel, seed: int, next_k: Callable[[int, int], int], k: int
) -> float:
    """Seconds of one answer under a policy that needs nothing but the last round (a fixed k,
    the reference, or plain with k = 0), played by `replay`'s rules and noise, without its
    events: `replay` with `FixedDraftLength` gives the same seconds (tested)."""
    rng = random.Random(seed)
    noise = costs.noise

    def timed(seconds: float) -> float:
        return seconds * math.exp(rng.gauss(0.0, noise)) if noise else seconds

    t, lag, seconds, n = 0, 0, 0.0, len(hits)
    queued = False
    while t < n:
        remaining = n - t
        playing = 0 if queued else max(0, min(k, MAX_DRAFT, remaining - 1))
        accepted, draft_s = 0, 0.0
        if playing:
            accepted = sum(1 for _ in takewhile(bool, hits[t : t + playing]))
            draft_s = timed(costs.draft_seconds(playing, lag))
        verify_s = timed(costs.queued if queued else costs.verify_seconds(playing + 1))
        overhead = timed(costs.overhead) if costs.overhead and not queued else 0.0
        queued = bool(costs.queued) and k == 0 and remaining > 1  # plain queues its next step
        seconds += draft_s + verify_s + overhead
        emitted = min(accepted + 1, remaining)
        lag = (1 if accepted == playing else 0) if playing else lag + emitted
        t += emitted
        if playing:
            k = next_k(playing, accepted)
    return seconds


class ReferencePolicy:
    """A simple schedule (transformers' heuristic): two longer after a round right on all it
    proposed, one shorter otherwise. Its state carries across answers, as the app's would."""

    def __init__(self, start: int = 5, longest: int = 8) -> None:
        self.k, self.longest = start, longest

    def __call__(self, played: int, accepted: int) -> int:
        self.k = min(self.longest, self.k + 2) if accepted == played else max(1, self.k - 1)
        return self.k


@dataclass(frozen=True, slots=True)
class CellResult:
    """Tokens per simulated second of each policy over a cell's answers, and the first answer's."""

    cell: Cell
    tokens: int
    plain: float
    fixed: dict[int, float]
    oracle: float  # each answer at its own best fixed k
    reference: float
    adaptive: float
    first_adaptive: float  # the cold controller's first answer
    first_best_fixed: float  # that answer at the cell's best fixed k
    first_plain: float
    rounds: int
    policy_seconds: float  # the controller's own Python time

    @property
    def best_k(self) -> int:
        return max(self.fixed, key=lambda k: self.fixed[k])

    @property
    def best_fixed(self) -> float:
        return self.fixed[self.best_k]

    @property
    def pays(self) -> bool:
        return self.best_fixed >= PAYS * self.plain

    def verdict(self) -> str:
        """'' where the cell meets its targets, else what it missed."""
        missed = []
        if self.pays:
            need = LONG if self.cell.length >= 128 else SHORT
            if self.adaptive < need * self.best_fixed:
                missed.append(f"{self.adaptive / self.best_fixed:.3f} of best fixed < {need}")
            if self.first_adaptive < FIRST * self.first_best_fixed:
                missed.append(f"first answer {self.first_adaptive / self.first_best_fixed:.3f} < {FIRST}")
        elif self.adaptive < NO_PAY * self.plain:
            missed.append(f"{self.adaptive / self.plain:.3f} of plain < {NO_PAY}")
        return "; ".join(missed)


def run_cell(cell: Cell, settings: ControllerSettings | None = None) -> CellResult:
    """Every policy over the cell's answers, each answer under the same seeded noise."""

    traces, costs = cell.traces(), cell.costs()
    seeds = [zlib.crc32(cell.name.encode()) % 100_003 * 1_000 + i for i in range(len(traces))]
    tokens = sum(len(t.answer) for t in traces)

    def speed(seconds: Sequence[float]) -> float:
        return tokens / sum(seconds)

    plain = [play(t.draft_hits, costs, s, lambda k, a: k, 0) for t, s in zip(traces, seeds)]
    fixed = {
        k: [play(t.draft_hits, costs, s, lambda kk, a: kk, k) for t, s in zip(traces, seeds)] for k in KS
    }
    step = ReferencePolicy()
    reference = [play(t.draft_hits, costs, s, step, step.k) for t, s in zip(traces, seeds)]
    clock = SimulatedClock()
    policy = AdaptiveDraftLength(settings=settings, clock=clock)
    adaptive, rounds, policy_seconds = [], 0, 0.0
    for trace, seed in zip(traces, seeds):
        result = replay(trace, policy, costs, clock=clock, seed=seed, lookup=False)
        adaptive.append(result.seconds)
        rounds += result.rounds
        policy_seconds += result.policy_seconds
    best_k = max(KS, key=lambda k: speed(fixed[k]))
    first = len(traces[0].answer)
    return CellResult(
        cell,
        tokens,
        speed(plain),
        {k: speed(v) for k, v in fixed.items()},
        speed([min(fixed[k][i] for k in KS) for i in range(len(traces))]),
        speed(reference),
        speed(adaptive),
        first / adaptive[0],
        first / fixed[best_k][0],
        first / plain[0],
        rounds,
        policy_seconds,
    )


def grid() -> list[Cell]:
    """Every cell: synthetic answers at each acceptance, independent and bursty, each draft cost,
    shape and length; the recorded answers at each draft cost and shape."""
    cells = [
        Cell(shape, c, alpha, bursty, length)
        for shape in SHAPES
        for c in DRAFT_COSTS
        for alpha in ALPHAS
        for bursty in (False, True)
        for length in LENGTHS
    ]
    cells += [Cell(shape, c, 0.0, False, 64) for shape in SHAPES for c in DRAFT_COSTS]
    return cells


def run_grid(
    cells: list[Cell], workers: int | None = None, settings: ControllerSettings | None = None
) -> list[CellResult]:
    workers = workers or os.cpu_count() or 1
    if workers == 1:
        return [run_cell(c, settings) for c in cells]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(run_cell, cells, [settings] * len(cells), chunksize=4))


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 0.0


def summary(results: list[CellResult]) -> list[str]:
    """The table by group, the misses, and the whole grid's figures."""
    lines = [
        f"{'cells':<34}{'n':>4}  {'adapt/plain':>11}  {'adapt/best':>10}  {'adapt/oracle':>12}"
        f"  {'ref/best':>8}  {'first/best':>10}  {'missed':>6}"
    ]
    groups: dict[str, list[CellResult]] = {}
    for r in results:
        kind = "recorded" if not r.cell.alpha else ("bursty" if r.cell.bursty else "independent")
        pays = "pays" if r.pays else "no k pays"
        groups.setdefault(f"{r.cell.shape} {kind} n{r.cell.length} {pays}", []).append(r)
    for name, rs in sorted(groups.items()):
        lines.append(
            f"{name:<34}{len(rs):>4}  {geomean([r.adaptive / r.plain for r in rs]):11.3f}"
            f"  {geomean([r.adaptive / r.best_fixed for r in rs]):10.3f}"
            f"  {geomean([r.adaptive / r.oracle for r in rs]):12.3f}"
            f"  {geomean([r.reference / r.best_fixed for r in rs]):8.3f}"
            f"  {geomean([r.first_adaptive / r.first_best_fixed for r in rs]):10.3f}"
            f"  {sum(1 for r in rs if r.verdict()):>6}"
        )
    misses = [r for r in results if r.verdict()]
    lines.append("")
    lines.append(f"missed targets: {len(misses)} of {len(results)} cells")
    for r in misses[:40]:
        lines.append(
            f"  {r.cell.name}: {r.verdict()} (plain {r.plain:.1f}, best fixed k={r.best_k} "
            f"{r.best_fixed / r.plain:.2f}x, adaptive {r.adaptive / r.plain:.2f}x)"
        )
    if len(misses) > 40:
        lines.append(f"  ... and {len(misses) - 40} more")
    adaptive = geomean([r.adaptive / r.best_fixed for r in results])
    reference = geomean([r.reference / r.best_fixed for r in results])
    rounds = sum(r.rounds for r in results)
    lines.append(
        f"grid geometric mean of best fixed k: adaptive {adaptive:.3f}, reference {reference:.3f}; "
        f"adaptive over plain {geomean([r.adaptive / r.plain for r in results]):.3f}"
    )
    lines.append(
        f"controller's own time per round: {1e6 * sum(r.policy_seconds for r in results) / rounds:.0f} µs "
        f"over {rounds} rounds"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.replay.gate", description=__doc__)
    parser.add_argument("--workers", type=int, default=None, help="processes (default: one per core)")
    parser.add_argument("--json", metavar="FILE", help="also write every cell's figures")
    parser.add_argument("--every", type=int, default=1, help="only every Nth cell (a quick look)")
    parser.add_argument(
        "--setting", action="append", default=[], metavar="NAME=VALUE", help="a controller setting to try"
    )
    args = parser.parse_args(argv)
    from lab.replay.__main__ import _settings

    settings = ControllerSettings(**_settings(args.setting))  # type: ignore[arg-type]
    results = run_grid(grid()[:: args.every], args.workers, settings)
    print("\n".join(summary(results)))
    if args.json:
        rows = [
            {
                "cell": r.cell.name,
                "plain": r.plain,
                "fixed": r.fixed,
                "oracle": r.oracle,
                "reference": r.reference,
                "adaptive": r.adaptive,
                "first": [r.first_adaptive, r.first_best_fixed, r.first_plain],
                "verdict": r.verdict(),
            }
            for r in results
        ]
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 1 if any(r.verdict() for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
