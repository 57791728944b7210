"""The answer being streamed, as the chat controller tracks it, and what it leaves behind: the
stats saved with it and its row in the speedup history."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from app.engine.features.baselines import context_bucket
from app.engine.store.history import Run
from app.engine.store.transcript import AnswerStats, AnswerTurn, MessageState
from app.ui.stats import LiveStats
from app.ui.tokens import Assembler


@dataclass
class Live:
    request: int
    message: AnswerTurn
    assembler: Assembler
    stats: LiveStats
    last_checkpoint: float = field(default_factory=time.monotonic)
    ids: list[int] = field(default_factory=list)  # the answer's token ids, for the losslessness check
    main: str = ""  # what wrote it, kept with the stats: a greedy replay needs the same model
    draft: str | None = None
    temperature: float = 0.0
    kind: str = "prose"  # the prompt's kind (app.engine.features.prompt_kind), for the speedup history
    context: int | None = None  # prompt tokens, once the worker has said

    def answer_stats(self) -> AnswerStats:
        return replace(
            self.stats.snapshot(),
            main=self.main,
            draft=self.draft,
            temperature=self.temperature,
            token_ids=tuple(self.ids),
        )

    def run(self, label: str, plain: float | None, state: MessageState, conversation: int | None) -> Run:
        """The history row of a finished answer whose context the worker has reported."""
        assert self.context is not None
        s, rate = self.stats, self.stats.stream_rate
        return Run(
            self.main,
            label,
            s.mode,
            self.kind,
            self.temperature,
            self.context,
            context_bucket(self.context),
            s.tokens,
            rate,
            plain,
            rate / plain if plain and rate else None,
            s.proposed,
            s.accepted,
            state,
            time.time(),
            conversation,
            self.message.key,
        )
