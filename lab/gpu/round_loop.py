"""Real answers' rounds against their passes, and the decode loop's own time between them.

A fixed-k answer is decoded by `run_timed`, as the benchmarks decode it. Each round's wall time
(from one round's event to the next) is set beside its draft and verify passes as the round
timed them and as they cost alone at the same sizes (`passes_alone`); what is left is the
loop's own time. That is split further by timing, round by round, what the loop does after a
verdict is read: reading it (accept), cutting at the answer's end (trim), rewinding the caches
(keep, which runs the cache check), the policy's observe, and emitting the tokens and the
event. The timing wraps those methods for the answer's length only, adds a few microseconds a
round, and changes nothing they do.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from app.engine.decoding import decode
from app.engine.decoding.loading import ModelPair
from app.engine.decoding.policy import FixedDraftLength
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.session import ChatSession
from app.engine.features.timed_run import TimedRun, run_timed
from app.engine.policy.oracle import RoundRecord
from lab.gpu.passes_alone import PassesAlone

# what the loop does after a round's verdict is read, in its order; check_caches runs inside keep
PARTS = ("accept", "trim", "keep", "check_caches", "observe", "emit")


class PartTimes:
    """Seconds spent in each part, one dict per round (a round starts at its `accept`)."""

    def __init__(self) -> None:
        self.rounds: list[dict[str, float]] = []

    def add(self, part: str, seconds: float) -> None:
        if self.rounds:  # a cache check during prefill belongs to no round
            self.rounds[-1][part] = self.rounds[-1].get(part, 0.0) + seconds

    def timed(self, part: str, method: Callable[..., Any], starts_round: bool = False) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if starts_round:
                self.rounds.append({})
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.add(part, time.perf_counter() - start)

        return wrapper

    def timed_generator(self, part: str, method: Callable[..., Iterator[Any]]) -> Callable[..., Any]:
        """A generator method's own time: its steps, not the consumer's between them."""

        def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, None, None]:
            inner = method(*args, **kwargs)
            while True:
                start = time.perf_counter()
                try:
                    item = next(inner)
                except StopIteration:
                    self.add(part, time.perf_counter() - start)
                    return
                self.add(part, time.perf_counter() - start)
                yield item

        return wrapper


@contextmanager
def timing_parts(policy: FixedDraftLength) -> Iterator[PartTimes]:
    """While open, the loop's after-verdict steps (and `policy.observe`) report their time."""
    parts = PartTimes()
    answer = decode._Answer  # the loop's round, timed where it runs rather than copied
    saved = {name: answer.__dict__[name] for name in ("accept", "trim", "keep", "emit")}
    check = ChatSession.__dict__["check_caches"]
    try:
        answer.accept = parts.timed("accept", saved["accept"], starts_round=True)  # type: ignore[method-assign]
        answer.trim = parts.timed("trim", saved["trim"])  # type: ignore[method-assign]
        answer.keep = parts.timed("keep", saved["keep"])  # type: ignore[method-assign]
        answer.emit = parts.timed_generator("emit", saved["emit"])  # type: ignore[method-assign]
        ChatSession.check_caches = parts.timed("check_caches", check)  # type: ignore[method-assign]
        policy.observe = parts.timed("observe", policy.observe)  # type: ignore[method-assign]
        yield parts
    finally:
        for name, method in saved.items():
            setattr(answer, name, method)
        ChatSession.check_caches = check  # type: ignore[method-assign]
        del policy.observe


@dataclass(frozen=True)
class ProfiledAnswer:
    """One timed answer and the time each after-verdict part took in each of its rounds."""

    run: TimedRun
    parts: list[dict[str, float]]

    def rounds(self) -> list[tuple[RoundRecord, dict[str, float]]]:
        """The draft rounds with a wall time (an answer's first also holds the prompt's read)."""
        return [
            (r, p)
            for r, p in zip(self.run.log, self.parts)
            if r.k and r.source == "draft" and r.wall_seconds > 0
        ]


def profile_answers(
    pair: ModelPair, prompt: list[int], k: int, tokens: int, answers: int
) -> list[ProfiledAnswer]:
    """`answers` greedy fixed-k answers to `prompt`, each in a fresh session, parts timed."""
    out = []
    for _ in range(answers):
        policy = FixedDraftLength(k)
        with timing_parts(policy) as parts:
            run = run_timed(pair, prompt, policy, SamplingParams(), tokens)
        if len(parts.rounds) != len(run.log):
            raise RuntimeError(f"{len(parts.rounds)} rounds timed in parts, {len(run.log)} in the answer")
        out.append(ProfiledAnswer(run, parts.rounds))
    return out


@dataclass(frozen=True)
class LoopProfile:
    """Per-round medians over every answer (seconds), and the answers' ratios."""

    rows: list[tuple[str, float]]
    wall_over_alone: float  # median over answers of their rounds' wall over their passes alone
    wall_over_in_round: float  # the same over the passes as the rounds timed them
    loop_own: float  # median round's wall less its passes as it timed them
    tokens_per_second: float  # median answer's, first token to last


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def loop_profile(answers: Sequence[ProfiledAnswer], alone: PassesAlone) -> LoopProfile:
    """The rounds of `answers` against their passes, and the loop's own time split by part."""
    pairs = [pair for a in answers for pair in a.rounds()]
    records = [r for r, _ in pairs]
    own = [r.wall_seconds - r.draft_seconds - r.verify_seconds for r in records]
    # the parts as means: most run in only some rounds (a check only after a trim), and means add up
    part_rows = [(f"  {name} (mean)", _mean([p.get(name, 0.0) for _, p in pairs])) for name in PARTS]
    named = [sum(p.get(name, 0.0) for name in PARTS if name != "check_caches") for _, p in pairs]
    rows = [
        ("round wall (event to event)", _median([r.wall_seconds for r in records])),
        ("draft phase, timed in the round", _median([r.draft_seconds for r in records])),
        ("verify pass, timed in the round", _median([r.verify_seconds for r in records])),
        ("draft alone (same k and catch-up)", _median([alone.draft[(r.k, r.catch_up)] for r in records])),
        ("verify alone (same size)", _median([alone.verify[r.k + 1] for r in records])),
        ("both passes alone", _median([alone.round_seconds(r) for r in records])),
        ("loop's own (wall less the round's passes)", _median(own)),
        ("loop's own (mean)", _mean(own)),
        *part_rows,
        ("  the rest (mean: plan, consumer, Python between)", _mean([o - n for o, n in zip(own, named)])),
    ]

    def ratio(a: ProfiledAnswer, passes: Callable[[RoundRecord], float]) -> float:
        rounds = [r for r, _ in a.rounds()]
        total = sum(passes(r) for r in rounds)
        return sum(r.wall_seconds for r in rounds) / total if total > 0 else 0.0

    return LoopProfile(
        rows=rows,
        wall_over_alone=_median([ratio(a, alone.round_seconds) for a in answers]),
        wall_over_in_round=_median([ratio(a, lambda r: r.draft_seconds + r.verify_seconds) for a in answers]),
        loop_own=_median(own),
        tokens_per_second=_median([a.run.decode_rate for a in answers]),
    )
