"""One slow round replayed: the adaptive controller with its rule for one-time costs on and off
(`policy/one_time.py`), against the same answers without the slow round, on simulated time.

A kernel compiled for a pass shape's first run is a one-time cost: on a GPU one round of a few
tenths of a second took 38 seconds. The replay makes one round of the first answer that many
times slower and nothing else, so what changes in the controller's choices is that round's doing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.engine.decoding.policy import PlainDecoding
from app.engine.measure.replay import CostModel, ReplayResult, SimulatedClock, Trace, replay
from app.engine.policy.adaptive import AdaptiveDraftLength
from app.engine.policy.config import AdaptiveConfig


@dataclass(frozen=True, slots=True)
class SlowRoundRun:
    """Adaptive over every answer, in order, with or without the slow round."""

    label: str
    result: ReplayResult  # every answer's, as one
    left_out: int  # rounds the controller kept out of its costs
    differ: int  # rounds whose choice differs from the run without the slow round (or are extra)

    def speed(self, plain: ReplayResult) -> float:
        """Tokens per second over plain's, not counting the slow round's own extra time: what
        the controller's choices made of the rest."""
        seconds = self.result.seconds - self.result.slow_seconds
        return self.result.tokens / seconds / plain.tokens_per_second


def _adaptive(
    traces: list[Trace], costs: CostModel, slow: dict[int, float] | None, config: AdaptiveConfig
) -> tuple[ReplayResult, int]:
    clock = SimulatedClock()
    controller = AdaptiveDraftLength(config, clock=clock)
    runs = [
        replay(t, controller, costs, clock=clock, slow=slow if i == 0 else None) for i, t in enumerate(traces)
    ]
    merged = runs[0]
    for r in runs[1:]:
        merged = merged.plus(r)
    return merged, controller.one_time.left_out


def _differ(a: list[tuple[str, int]], b: list[tuple[str, int]]) -> int:
    return sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))


def compare_slow_round(
    traces: list[Trace], costs: CostModel, round_index: int, factor: float = 100.0
) -> tuple[ReplayResult, list[SlowRoundRun]]:
    """Plain, and adaptive without the slow round, with it and the rule on, with it and the rule
    off; round `round_index` of the first answer takes `factor` times its passes."""
    plain = replay(traces[0], PlainDecoding(), costs)
    for t in traces[1:]:
        plain = plain.plus(replay(t, PlainDecoding(), costs))
    on, off = AdaptiveConfig(), AdaptiveConfig(one_time_factor=None)
    slow = {round_index: factor}
    base, _ = _adaptive(traces, costs, None, on)
    runs = [SlowRoundRun("no slow round", base, 0, 0)]
    for label, config in (("rule on", on), ("rule off", off)):
        result, left = _adaptive(traces, costs, slow, config)
        runs.append(SlowRoundRun(label, result, left, _differ(result.choices, base.choices)))
    return plain, runs


def comparison_lines(
    traces: list[Trace], costs: CostModel, rounds: Iterable[int], factor: float
) -> list[str]:
    """One line per slow round's position, and over several, the worst and mean of each rule's
    speed against the run without it."""
    lines = [
        f"{costs.name}: slow round x{factor:g} in answer 1; adaptive speed over plain net of that round's "
        "own time, and choices unlike the run without it"
    ]
    ratios: dict[str, list[float]] = {"rule on": [], "rule off": []}
    unchanged = {"rule on": 0, "rule off": 0}
    for r in rounds:
        plain, runs = compare_slow_round(traces, costs, r, factor)
        if not runs[1].result.slow_seconds:
            lines.append(f"  round {r}: the first answer has fewer rounds")
            break
        base = runs[0].speed(plain)
        cells = [
            f"round {r:3d} {runs[0].result.choices[r][0]} k={runs[0].result.choices[r][1]}: none {base:.3f}x"
        ]
        for run in runs[1:]:
            cells.append(
                f"{run.label} {run.speed(plain):.3f}x ({run.differ:3d} differ, {run.left_out} left out)"
            )
            ratios[run.label].append(run.speed(plain) / base)
            unchanged[run.label] += run.differ == 0
        lines.append("  " + "  ".join(cells))
    if len(ratios["rule on"]) > 1:
        for label, values in ratios.items():
            lines.append(
                f"  {label}: speed against no slow round worst {min(values):.3f}, "
                f"mean {sum(values) / len(values):.3f}; choices unchanged in "
                f"{unchanged[label]}/{len(values)}"
            )
    return lines
