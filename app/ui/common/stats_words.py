"""An answer's numbers in plain words, one line that never contradicts itself.

Qt-free so every case is unit-tested. Every number comes from the answer's one record,
`figures(stats)` (app.engine.features.figures defines each term and how it is written), so the
strip, the line under the answer, its tooltip and the dashboard say the same. A speedup is claimed
only when the draft really ran and the main model's plain speed at this context is known (the
baseline table); otherwise the line says what happened instead of printing a ratio against nothing.
"""

from __future__ import annotations

from app.engine.features.figures import (
    MIN_TIMED_TOKENS,
    AnswerFigures,
    answer_figures,
    percent_text,
    speed_text,
    speedup_range_note,
    speedup_text,
)
from app.engine.protocol import PairLoaded
from app.engine.store.transcript import AnswerStats

NO_DRAFT_MODES = {"plain", "off"}
TOO_SHORT = "too short to judge the speed"  # an answer under MIN_TIMED_TOKENS, in every view
SAME_SPEED = 0.05  # within 5 % of plain reads as "about as fast": less is timing noise

# the links under a turn, by the action each one sends
ACTION_LABELS = {
    "edit": "Edit",
    "regenerate": "Regenerate",
    "copymsg": "Copy",
    "check": "Check losslessness",
    "cancelcheck": "Cancel check",
}

GLOSSARY: tuple[tuple[str, str], ...] = (
    ("Main model", "The model whose answer you get. Every word it shows is one it would write alone."),
    (
        "Draft model",
        "A small model that guesses the next few words ahead. The main model checks the guesses "
        "all at once and keeps the ones it agrees with, which is faster than writing them one by one.",
    ),
    ("Draft length", "How many words the draft guesses ahead before the main model checks them."),
    (
        "Acceptance",
        "The share of the guesses (the draft's, and words copied from your prompt) that the main model kept.",
    ),
    (
        "From the draft",
        "The share of the answer's words that the draft guessed and the main model kept. It is "
        "lower than the acceptance: every round the main model adds one word of its own.",
    ),
    (
        "Accepted per round",
        "How many guessed words the main model kept on average each time it checked a guess.",
    ),
    (
        "Speedup",
        "How much faster the answer came than the main model alone at the same conversation length, "
        "measured at least three times while you were idle, under the same load on the computer "
        "and within half an hour of the answer. The range after it is where the true figure lies "
        "9 times in 10. Answers under 8 words are too short to judge.",
    ),
    (
        "Drafting paused",
        "When the draft's guesses cost more time than they save, SpecChat stops asking for them and "
        "tries again now and then. The answer is the same; only the speed changes.",
    ),
    (
        "Prompt lookup",
        "Guesses copied from your own message (useful when the answer repeats it, as in code edits); "
        "shown in blue.",
    ),
    ("Refused guess", "A draft guess the main model did not agree with; it never enters the answer."),
    (
        "Oracle",
        "The best fixed draft length for an answer, found afterwards. Its speedup is estimated from "
        "the answer's own rounds, not measured; the draft arena measures real runs.",
    ),
    (
        "Residual sampling",
        "At a temperature above 0, a way of accepting draft guesses that keeps the answer's "
        "randomness exactly what the main model alone would have.",
    ),
    (
        "Losslessness check",
        "Replays an answer with the main model alone and compares word by word, to show that the "
        "draft changed nothing.",
    ),
)


def figures(stats: AnswerStats, plain_tok_s: float | None = None) -> AnswerFigures:
    """The answer's one record: every view reads its numbers from here. `plain_tok_s`: the main
    model's plain speed at the answer's context, for an answer whose stats do not hold one yet."""
    return answer_figures(
        tokens=stats.tokens,
        tok_s=stats.tokens_per_second,
        plain_tok_s=stats.plain_tokens_per_second or plain_tok_s,
        proposed=stats.proposed,
        accepted=stats.accepted,
        drafting_rounds=stats.drafting_rounds,
        from_prompt=stats.lookup_accepted or 0,
        drafted=stats.mode not in NO_DRAFT_MODES,
        plain_range=(stats.plain_low, stats.plain_high)
        if stats.plain_low and stats.plain_high and stats.plain_tokens_per_second
        else None,
    )


def speed(stats: AnswerStats) -> str:
    return speed_text(figures(stats).tok_s)


def draft_share(stats: AnswerStats) -> str | None:
    """How much of the answer the draft (and prompt lookup) wrote, when they wrote any."""
    f = figures(stats)
    parts = [f"{percent_text(f.draft_share)} from the draft"] if f.draft_share else []
    if f.prompt_share:
        parts.append(f"{percent_text(f.prompt_share)} from your prompt")
    return " · ".join(parts) or None


def speedup_words(speedup: float, sure: tuple[float, float] | None = None) -> str:
    """A measured speedup in words, its ratio written as everywhere else, with the range plain's
    measurements allow (`sure`, slowest first) where they were kept: "about 1.80× (1.62–1.98×)"."""
    ratio = speedup_text(speedup)
    if sure is not None:
        ratio = f"about {ratio}{speedup_range_note(sure)}"
    if speedup > 1 - SAME_SPEED and speedup < 1 + SAME_SPEED:
        return f"{ratio} — about as fast as without the draft"
    if sure is not None and sure[0] <= 1 <= sure[1]:
        return f"{ratio} — not surely faster or slower than without the draft yet"
    if speedup >= 1 + SAME_SPEED:
        return f"{ratio} faster than without the draft"
    return f"{ratio} — slower than without the draft (try another draft)"


def verdict(stats: AnswerStats) -> str:
    """What the draft did for this answer, in words."""
    # nothing proposed and no draft model: prompt lookup alone found nothing, or nothing could draft
    if stats.mode in NO_DRAFT_MODES or (not stats.proposed and (not stats.mode or stats.draft is None)):
        return "no draft"
    if stats.draft_rarely_right is not None and stats.bypassed:
        right, judged = stats.draft_rarely_right
        return f"this draft was right on {right} of {judged} guesses — drafting paused (try another draft)"
    if stats.bypassed:
        return "the draft isn't helping here — drafting paused"
    if not stats.proposed:
        return "the draft has not run yet"
    if stats.tokens < MIN_TIMED_TOKENS:
        return TOO_SHORT
    f = figures(stats)
    return "speedup not measured yet" if f.speedup is None else speedup_words(f.speedup, f.speedup_range)


def summary(stats: AnswerStats) -> str:
    """The strip's line: speed, then what the draft did."""
    parts = [speed(stats), verdict(stats)]
    if stats.draft_stopped:
        parts.append(stats.draft_stopped)
    return " · ".join(parts)


def answer_line(stats: AnswerStats) -> str:
    """The line under a finished answer: speed, speedup when measured, the draft's share."""
    parts = [speed(stats)]
    said = verdict(stats)
    if "×" in said or "paused" in said or said == TOO_SHORT:
        parts.append(said)
    share = draft_share(stats)
    if share:
        parts.append(share)
    return " · ".join(parts)


def pair_line(loaded: PairLoaded, mode_override: str | None) -> str:
    """The model bar's line for a loaded pair: the two models' folder names, and where the main
    runs. `mode_override` is "lookup" or "off" when the picker chose no draft model."""

    def name(path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[-1]

    no_draft = {"lookup": "prompt lookup", "off": "no draft"}.get(mode_override or "", "no draft")
    draft = name(loaded.draft) if loaded.draft else no_draft
    if loaded.machines:
        where = f"  ·  main split over {loaded.machines} machines"
    else:
        where = f"  ·  running on the {loaded.device.upper()}" if loaded.device else ""
    return f"{name(loaded.main)}  +  {draft}{where}"
