"""The answer being streamed, as the chat controller tracks it, and what it leaves behind: the
stats saved with it and its row in the speedup history."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from app.engine.features.baselines import PlainReading, context_bucket
from app.engine.store.history import Run
from app.engine.store.transcript import AnswerStats, AnswerTurn, MessageState
from app.ui.chat.stats import LiveStats
from app.ui.chat.tokens import Assembler
from app.ui.common.stats_words import NO_DRAFT_MODES, figures


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

    def current_stats(self) -> AnswerStats:
        """The stats so far while it streams; once finished, the answer's own, which later news
        (its plain speed, measured afterwards) may complete."""
        return self.answer_stats() if self.message.live else self.message.stats

    def run(
        self,
        label: str,
        plain: PlainReading | None,
        state: MessageState,
        conversation: int | None,
        load: float | None,
    ) -> Run:
        """The history row of a finished answer whose context the worker has reported: its record's
        numbers (`plain` only where its stats hold no plain speed), so the history says the same.
        `load`: the machine's load at its end, which a plain speed measured later must match."""
        assert self.context is not None
        s = self.answer_stats()
        if plain is not None and not s.plain_tokens_per_second:
            s = replace(s, plain_tokens_per_second=plain.tok_s, plain_low=plain.low, plain_high=plain.high)
        f = figures(s)
        drafted = s.mode not in NO_DRAFT_MODES
        return Run(
            self.main,
            label,
            s.mode,
            self.kind,
            self.temperature,
            self.context,
            context_bucket(self.context),
            s.tokens,
            f.tok_s or 0.0,
            f.plain_tok_s if drafted else None,
            f.speedup,
            s.proposed,
            s.accepted,
            state,
            time.time(),
            conversation,
            self.message.key,
            s.drafting_rounds,
            load,
            s.plain_low if drafted and f.plain_tok_s else None,
            s.plain_high if drafted and f.plain_tok_s else None,
        )
