"""Answers whose plain speed was measured after them: their stats take the value their history
row was given, so the strip, the line under the answer and the dashboard's history agree.

The plain speed at an answer's context is often measured in the background only once the answer
is done (app.ui.common.plain_speed). The history rows of that context get it at once
(`RunHistory.fill_baseline`); the answers' own stats get the same value from those rows, both
when the news comes and when a conversation is opened later.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from app.engine.store.history import RunHistory
from app.engine.store.transcript import AnswerStats, AnswerTurn, Transcript, Turn
from app.ui.common.stats_words import NO_DRAFT_MODES, figures


def with_plain_speed(
    stats: AnswerStats, plain_tok_s: float, sure: tuple[float, float] | None = None
) -> AnswerStats:
    """The stats compared with `plain_tok_s` (in the range `sure`, slowest first); stats that
    already hold a plain speed keep theirs."""
    if stats.plain_tokens_per_second or stats.mode in NO_DRAFT_MODES:
        return stats
    low, high = sure or (None, None)
    filled = replace(stats, plain_tokens_per_second=plain_tok_s, plain_low=low, plain_high=high)
    return replace(filled, speedup=figures(filled).speedup)


Speeds = dict[int, tuple[float, tuple[float, float] | None]]


def _missing(turns: Iterable[Turn], speeds: Speeds) -> list[tuple[AnswerTurn, AnswerStats]]:
    out = []
    for turn in turns:
        if isinstance(turn, AnswerTurn) and not turn.live and turn.key in speeds:
            stats = with_plain_speed(turn.stats, *speeds[turn.key])
            if stats != turn.stats:
                out.append((turn, stats))
    return out


def fill_turns(turns: list[Turn], history: RunHistory, conversation: int) -> list[Turn]:
    """Turns being opened, each answer with the plain speed its history row holds (in place)."""
    for turn, stats in _missing(turns, history.plain_speeds(conversation)):
        turn.stats = stats
    return turns


def fill_transcript(
    transcript: Transcript, history: RunHistory, conversation: int | None
) -> list[AnswerTurn]:
    """The shown conversation's answers that a new plain speed completes; returns them."""
    if conversation is None:
        return []
    changed = _missing(transcript, history.plain_speeds(conversation))
    for turn, stats in changed:
        transcript.update_stats(turn, stats)
    return [turn for turn, _ in changed]
