"""An answer's numbers in plain words, one line that never contradicts itself.

Qt-free so every case is unit-tested. A speedup is claimed only when the draft really ran and the
main model's plain speed at this context is known (the baseline table); otherwise the line says
what happened instead of printing a ratio against nothing.
"""

from __future__ import annotations

from app.engine.protocol import PairLoaded
from app.engine.store.transcript import AnswerStats

NO_DRAFT_MODES = {"plain", "off"}
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
    ("Acceptance", "The share of the draft's guesses that the main model kept."),
    (
        "Speedup",
        "How much faster the answer came than the main model alone at the same conversation length "
        "(measured once per model and length, in the background).",
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
        "Slow round left out of timing",
        "The first time SpecChat runs a new kind of step, the computer may first prepare it, and "
        "that one step takes far longer than usual. Such a step is left out when SpecChat decides "
        "how far the draft should guess ahead, so a one-time wait does not make the draft look slow.",
    ),
    (
        "Oracle",
        "The best fixed draft length for an answer, found afterwards; the dashboard compares with it.",
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


def slow_rounds_words(count: int) -> str:
    """Rounds whose time the controller left out of its costs, in plain words."""
    rounds = "slow round" if count == 1 else "slow rounds"
    return f"{count} {rounds} left out of timing (first use of a pass shape)"


def speed(stats: AnswerStats) -> str:
    return f"{stats.tokens_per_second:.0f} tok/s" if stats.tokens_per_second else "— tok/s"


def draft_share(stats: AnswerStats) -> str | None:
    """How much of the answer the draft wrote, when it wrote any."""
    if not stats.tokens or not stats.accepted:
        return None
    return f"{min(stats.accepted / stats.tokens, 1.0):.0%} from the draft"


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
    if stats.speedup is None or not stats.plain_tokens_per_second:
        return "speedup not measured yet"
    if stats.speedup >= 1 + SAME_SPEED:
        return f"about {stats.speedup:.1f}× faster than without the draft"
    if stats.speedup > 1 - SAME_SPEED:
        return "about as fast as without the draft"
    return f"{stats.speedup:.2f}× — slower than without the draft (try another draft)"


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
    if said.startswith("about") or "slower" in said or "paused" in said:
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
