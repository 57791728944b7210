"""One answer decoded and timed from the outside: what the arena and the benchmark compare.

Every mode is timed the same way: the decode rate is (tokens - 1) over the time between the
first and the last token, so prompt processing (identical for all modes) does not dilute the
ratios. Rounds are kept as the oracle reads them (policy/oracle.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from app.engine.decoding.decode import generate
from app.engine.decoding.events import GenerationFinished, RoundEvent, TokenEvent
from app.engine.decoding.loading import ModelPair
from app.engine.decoding.policy import DraftPolicy
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.session import ChatSession
from app.engine.policy.oracle import RoundRecord


@dataclass
class TimedRun:
    """The tokens of one answer with the wall-clock time each arrived, and its rounds."""

    ids: list[int]
    stamps: list[float]  # time.perf_counter() when each token arrived
    start: float  # time.perf_counter() before the prompt was sent
    proposed: int = 0
    accepted: int = 0
    rounds: int = 0
    log: list[RoundRecord] = field(default_factory=list)

    @property
    def decode_span(self) -> tuple[int, float]:
        """Tokens after the first, and the seconds from the first token to the last."""
        if len(self.stamps) < 2:
            return 0, 0.0
        return len(self.stamps) - 1, self.stamps[-1] - self.stamps[0]

    @property
    def decode_rate(self) -> float:
        """Tokens per second from the first token to the last (0 with fewer than two)."""
        tokens, span = self.decode_span
        return tokens / span if span > 0 else 0.0

    @property
    def answer_seconds(self) -> float:
        """From the prompt sent to the last token (0 with no token)."""
        return self.stamps[-1] - self.start if self.stamps else 0.0


def run_timed(
    pair: ModelPair,
    prompt: list[int],
    policy: DraftPolicy,
    sampling: SamplingParams,
    max_tokens: int,
    acceptance: str | None = None,
    compiled: bool | None = None,
) -> TimedRun:
    """Decode one answer to `prompt` in a fresh session of `pair`, timing every token.
    `compiled`: as `ChatSession(compiled_steps=...)` (None: as the warm-up measured)."""
    session = ChatSession(pair, compiled_steps=compiled)
    timing = TimedRun([], [], time.perf_counter())
    last = 0.0
    for event in generate(
        session, prompt, sampling=sampling, policy=policy, max_tokens=max_tokens, acceptance=acceptance
    ):
        if isinstance(event, TokenEvent):
            timing.ids.append(event.id)
            timing.stamps.append(time.perf_counter())
        elif isinstance(event, RoundEvent):
            now = time.perf_counter()
            timing.log.append(RoundRecord.of(event, now - last if last else 0.0))
            last = now
            timing.rounds += 1
            timing.proposed += event.k
            timing.accepted += event.accepted
        elif isinstance(event, GenerationFinished):
            break
    return timing
