"""What `gpu_bench` prints: each prompt's modes reduced to a row, a summary per mode, and each
fixed k's round against its floors, its passes and Leviathan's prediction (`format_costs`).

Kept apart from the runs so that the arithmetic (stalls against their kind's median, answers
against the plain answer timed beside them) is tested on made-up answers without a model."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from app.engine.features.timed_run import TimedRun
from app.engine.policy.oracle import Tally, leviathan_rate
from lab.gpu.floors import Floors, copy_mib
from lab.gpu.passes_alone import PassesAlone, draft_rounds, wall_over_alone

COLUMNS = (
    "prompt",
    "mode",
    "tok/s",
    "ratio",
    "accepted",
    "rounds",
    "worst/step",
    ">3 steps",
    "stall",
    "same",
)
SLOW_STEPS = 3.0  # a round longer than this many plain steps is a stall worth counting
FIRST_ANSWER_SLACK = 0.10  # the first answer should take at most this much longer than later ones


@dataclass(frozen=True)
class ModeRun:
    """One answer in one mode, reduced to what the table prints."""

    prompt: str
    mode: str
    tokens: int
    answer_seconds: float  # prompt sent to last token
    tok_per_s: float  # first token to last, all answers together
    ratio: float  # tok_per_s against plain's
    answer_ratios: tuple[float, ...]  # each answer's speed against plain's in the same turn
    proposed: int
    accepted: int
    rounds: int
    worst_step: float  # longest round (mlx-lm: longest gap between tokens), in seconds
    worst_excess: float  # longest round beyond its kind's median (`_excess`), in seconds
    slow_rounds: int  # rounds over SLOW_STEPS median plain steps
    plain_step: float  # the median gap between plain's tokens for this prompt, in seconds
    same_as_plain: bool
    slow: tuple[str, ...] = ()  # each round over SLOW_STEPS plain steps: what it was and its parts
    again_seconds: float = 0.0  # with --repeat: the median answer time of the same prompt's later answers
    # with --repeat: the first answer's time against plain's in its turn, over the later answers' median
    first_beside: float = 0.0


def gaps(stamps: Sequence[float]) -> list[float]:
    """The time between successive tokens."""
    return [b - a for a, b in zip(stamps, stamps[1:])]


def _excess(run: TimedRun) -> float:
    """The longest round's time beyond the median of rounds of its own kind (same k, queued or
    not, catching up or not), in seconds: a stall, as against what those passes cost once
    compiled. mlx-lm's tokens' gaps stand in for its rounds."""
    if not run.log:
        between = gaps(run.stamps)
        return max(between) - statistics.median(between) if between else 0.0
    kinds: dict[tuple[int, bool, bool], list[float]] = {}
    for r in run.log:
        if r.wall_seconds > 0:
            kinds.setdefault((r.k, r.overlapped, r.catch_up > 0), []).append(r.wall_seconds)
    return max((max(w) - statistics.median(w) for w in kinds.values()), default=0.0)


def _rate(runs: Sequence[TimedRun]) -> float:
    """Tokens per second over every run's first token to last, the runs together."""
    spans = [r.decode_span for r in runs]
    seconds = sum(s for _, s in spans)
    return sum(n for n, _ in spans) / seconds if seconds > 0 else 0.0


def reduce_answers(
    prompt: str, mode: str, runs: Sequence[TimedRun], plains: Sequence[TimedRun], step: float
) -> ModeRun:
    """The mode's answers to one prompt (one per repeat) as one row: counts and answer time are
    the first answer's, the speed all of them together, the worst round the worst of any."""
    run, plain = runs[0], plains[0]
    rate, plain_rate = _rate(runs), _rate(plains)
    ratios = tuple(
        one.decode_rate / other.decode_rate if other.decode_rate > 0 else 0.0
        for one, other in zip(runs, plains)
    )
    # our loop reports its rounds; mlx-lm's does not, so its tokens' gaps stand in for them
    walls = [r.wall_seconds for one in runs for r in one.log if r.wall_seconds > 0]
    walls = walls or [g for one in runs for g in gaps(one.stamps)]
    return ModeRun(
        prompt=prompt,
        mode=mode,
        tokens=len(run.ids),
        answer_seconds=run.answer_seconds,
        tok_per_s=rate,
        ratio=rate / plain_rate if plain_rate > 0 else 0.0,
        answer_ratios=ratios,
        proposed=run.proposed,
        accepted=run.accepted,
        rounds=run.rounds,
        worst_step=max(walls, default=0.0),
        worst_excess=max(_excess(one) for one in runs),
        slow_rounds=sum(w > SLOW_STEPS * step for w in walls) if step > 0 else 0,
        plain_step=step,
        same_as_plain=all(one.ids == plain.ids for one in runs),
        slow=tuple(
            f"round {i}: k={r.k} {r.why or r.source} catch-up {r.catch_up} "
            f"{'queued' if r.overlapped else 'alone'}; draft {r.draft_seconds * 1e3:.1f} ms, "
            f"verify {r.verify_seconds * 1e3:.1f} ms, round {r.wall_seconds * 1e3:.1f} ms"
            for one in runs
            for i, r in enumerate(one.log)
            if step > 0 and r.wall_seconds > SLOW_STEPS * step
        ),
        again_seconds=statistics.median(one.answer_seconds for one in runs[1:]) if len(runs) > 1 else 0.0,
        first_beside=_first_beside(runs, plains) if mode != "plain" else 0.0,
    )


def _first_beside(runs: Sequence[TimedRun], plains: Sequence[TimedRun]) -> float:
    """How much longer the first answer took than later ones, each timed against the plain answer
    of its turn: a host whose step drifted 30% between two answers flagged even fixed k's first."""
    beside = [one.answer_seconds / other.answer_seconds for one, other in zip(runs, plains)]
    return beside[0] / statistics.median(beside[1:]) if len(beside) > 1 and min(beside) > 0 else 0.0


def format_table(results: Sequence[Sequence[ModeRun]]) -> list[str]:
    """One block per prompt: each mode's speed, its ratio to plain, and its worst round."""
    lines = ["  ".join(f"{c:>10}" for c in COLUMNS)]
    for runs in results:
        for r in runs:
            cells = (
                r.prompt,
                r.mode,
                f"{r.tok_per_s:.1f}",
                f"{r.ratio:.2f}",
                f"{r.accepted}/{r.proposed}",
                str(r.rounds),
                f"{r.worst_step / r.plain_step:.1f}" if r.plain_step > 0 else "-",
                str(r.slow_rounds),
                f"{r.worst_excess / r.plain_step:.1f}" if r.plain_step > 0 else "-",
                "yes" if r.same_as_plain else "NO",
            )
            lines.append("  ".join(f"{c:>10}" for c in cells))
    return lines


def first_answer_text(first: float) -> str:
    """A first answer's time against later ones, with the warm-up target's verdict."""
    return f"{first:.2f} {'ok' if first <= 1 + FIRST_ANSWER_SLACK else 'SLOW'}"


def _geomean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in values)) if values and min(values) > 0 else 0.0


def format_summary(results: Sequence[Sequence[ModeRun]]) -> list[str]:
    """Per mode: the geometric mean of the prompts' ratios, the worst prompt's, the geometric mean
    of each prompt's median answer against the plain one beside it, and the first answer's time
    against later ones (warm-up's target: within FIRST_ANSWER_SLACK): with --repeat each against
    the plain answer of its turn, plain's own and a single run's against the later answers."""
    lines = [f"{'mode':>10}  {'mean ratio':>10}  {'worst':>6}  {'paired median':>13}  {'first/later':>11}"]
    for i, mode in enumerate(r.mode for r in results[0]):
        mean = _geomean([runs[i].ratio for runs in results])
        worst = min(runs[i].ratio for runs in results)
        paired = _geomean([statistics.median(runs[i].answer_ratios) for runs in results])
        # the same prompt answered again where there is one: other prompts' answers differ in
        # length, acceptance and the key widths they cross
        again = results[0][i].again_seconds
        later = [again] if again > 0 else [runs[i].answer_seconds for runs in results[1:]]
        first = results[0][i].first_beside
        if not first and later and statistics.median(later) > 0:
            first = results[0][i].answer_seconds / statistics.median(later)
        first_text = first_answer_text(first) if first else "-"
        lines.append(f"{mode:>10}  {mean:>10.2f}  {worst:>6.2f}  {paired:>13.2f}  {first_text:>11}")
    return lines


COST_COLUMNS = (
    "mode",
    "draft/tok",
    "d/compiled",
    "d/weights",
    "verify",
    "v/step",
    "v/compiled",
    "v/weights",
    "wall",
    "wall/in",
    "wall/alone",
    "predicted",
    "measured",
    "meas/pred",
)


@dataclass(frozen=True)
class FixedCosts:
    """One fixed-k mode's rounds against their floors and their passes (seconds, tokens/s)."""

    mode: str
    k: int
    draft_per_token: float  # median draft phase of the mode's k-rounds, over k
    verify: float  # median verify pass of those rounds (k + 1 tokens)
    wall: float  # median round, from one round's event to the next
    wall_over_in_round: float  # the rounds' wall time over their own draft and verify times
    wall_over_alone: float  # the rounds' wall time over their passes timed alone
    acceptance: tuple[float, ...]  # by position, each given the one before was accepted
    predicted_rate: float  # Leviathan's formula on that acceptance and the median passes
    measured_rate: float  # tokens per second, first token to last, every answer together


def fixed_costs(mode: str, k: int, runs: Sequence[TimedRun], alone: PassesAlone) -> FixedCosts:
    """A fixed-k mode's answers reduced to what a round costs and what its speed should be."""
    records = draft_rounds(r for run in runs for r in run.log)
    played = [r for r in records if r.k == k]  # an answer's last round may draft fewer
    tally = Tally(max(k, 8))
    for run in runs:
        for r in run.log:
            tally.add(r)
    rates = tuple(tally.acceptance()[:k])
    draft = statistics.median(r.draft_seconds for r in played) if played else 0.0
    verify = statistics.median(r.verify_seconds for r in played) if played else 0.0
    in_round = sum(r.draft_seconds + r.verify_seconds for r in records)
    return FixedCosts(
        mode=mode,
        k=k,
        draft_per_token=draft / k,
        verify=verify,
        wall=statistics.median(r.wall_seconds for r in played) if played else 0.0,
        wall_over_in_round=sum(r.wall_seconds for r in records) / in_round if in_round > 0 else 0.0,
        wall_over_alone=wall_over_alone(records, alone),
        acceptance=rates,
        predicted_rate=leviathan_rate(rates, draft, verify) if played else 0.0,
        measured_rate=_rate(runs),
    )


def _times(value: float, floor: float) -> str:
    return f"{value / floor:.2f}" if floor > 0 and value > 0 else "-"


def format_costs(
    costs: Sequence[FixedCosts], draft: Floors, main: Floors, plain_step: float, plain_alone: float
) -> list[str]:
    """The floors, the main's plain step against its own, and per fixed k the draft's cost per
    token, the verify pass and the round against theirs (ms; ratios are times the floor)."""
    gb, mb = 1e9, 1e6
    lines = [
        f"floors, measured after warm-up: memory bandwidth {draft.bandwidth / gb:.1f} GB/s "
        f"(a {copy_mib()} MiB copy)",
        f"  draft: compiled 1-token forward {draft.compiled_step * 1e3:.2f} ms, "
        f"weights {draft.weight_bytes / mb:.1f} MB / bandwidth {draft.streaming * 1e3:.2f} ms",
        f"  main: compiled 1-token forward {main.compiled_step * 1e3:.2f} ms, "
        f"weights {main.weight_bytes / mb:.1f} MB / bandwidth {main.streaming * 1e3:.2f} ms",
        f"  main plain step {plain_step * 1e3:.2f} ms in answers "
        f"({_times(plain_step, main.compiled_step)}x compiled, {_times(plain_step, main.streaming)}x weights), "
        f"{plain_alone * 1e3:.2f} ms alone",
        "  ".join(f"{c:>10}" for c in COST_COLUMNS),
    ]
    for c in costs:
        cells = (
            c.mode,
            f"{c.draft_per_token * 1e3:.2f}",
            _times(c.draft_per_token, draft.compiled_step),
            _times(c.draft_per_token, draft.streaming),
            f"{c.verify * 1e3:.2f}",
            _times(c.verify, plain_alone),
            _times(c.verify, main.compiled_step),
            _times(c.verify, main.streaming),
            f"{c.wall * 1e3:.2f}",
            f"{c.wall_over_in_round:.2f}",
            f"{c.wall_over_alone:.2f}",
            f"{c.predicted_rate:.1f}",
            f"{c.measured_rate:.1f}",
            _times(c.measured_rate, c.predicted_rate),
        )
        lines.append("  ".join(f"{x:>10}" for x in cells))
    return lines
