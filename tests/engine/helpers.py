"""Small drivers shared by the engine tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from threading import Event

from app.engine.decoding.decode import generate
from app.engine.decoding.events import (
    EngineError,
    GenerationFinished,
    PrefillProgress,
    RoundEvent,
    TokenEvent,
)
from app.engine.decoding.policy import DraftPolicy, PlainDecoding
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.session import ChatSession


@dataclass
class Outcome:
    tokens: list[TokenEvent] = field(default_factory=list)
    rounds: list[RoundEvent] = field(default_factory=list)
    progress: list[PrefillProgress] = field(default_factory=list)
    notices: list[EngineError] = field(default_factory=list)
    finished: GenerationFinished | None = None
    offsets_ok: bool = True

    @property
    def ids(self) -> list[int]:
        return [t.id for t in self.tokens]


def drive(
    session: ChatSession,
    prompt: list[int],
    policy: DraftPolicy | None = None,
    *,
    max_tokens: int = 40,
    sampling: SamplingParams | None = None,
    cancel_after: int | None = None,
    stop_ids: list[int] | None = None,
    acceptance: str | None = None,
) -> Outcome:
    """Run one generation, checking the cache invariant after every round."""
    out = Outcome()
    cancel = Event()
    for event in generate(
        session,
        prompt,
        sampling=sampling,
        policy=policy or PlainDecoding(),
        max_tokens=max_tokens,
        cancel=cancel,
        stop_ids=stop_ids,
        acceptance=acceptance,
    ):
        if isinstance(event, TokenEvent):
            out.tokens.append(event)
            if cancel_after is not None and len(out.tokens) >= cancel_after:
                cancel.set()
        elif isinstance(event, RoundEvent):
            out.rounds.append(event)
            main, draft = session.cache_offsets()
            out.offsets_ok &= all(o == len(session.tokens) + session.main_ahead for o in main)
            out.offsets_ok &= all(o == session.draft_offset for o in draft)
            out.offsets_ok &= session.draft_len <= len(session.tokens)
        elif isinstance(event, PrefillProgress):
            out.progress.append(event)
        elif isinstance(event, EngineError):
            out.notices.append(event)
        elif isinstance(event, GenerationFinished):
            out.finished = event
            # a queued plain step the answer did not use must have been taken back out
            out.offsets_ok &= session.main_ahead == 0
            out.offsets_ok &= all(o == len(session.tokens) for o in session.cache_offsets()[0])
    return out
