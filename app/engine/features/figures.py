"""An answer's headline numbers, computed in one place, and the one way each is written.

The status strip, the line under each answer, the dashboard, its history and the draft arena all
show these numbers; each is defined once here, so no two places disagree about one answer:

- speed: tokens after the first over the time from the first token to the last (tok/s). Plain
  baselines are measured the same way, so the two divide fairly.
- speedup: that speed over the main model's plain speed at the answer's context. Only when the
  draft ran: plain rounds inside an answer are no baseline.
- acceptance: the guesses the main model kept over the guesses proposed (the draft model's and
  prompt lookup's together), so it judges the guessing.
- from the draft: the answer's tokens that the draft model guessed, over all its tokens; "from
  your prompt" is the same for prompt lookup. These judge the answer, not the guessing: an
  answer can keep 95 % of the guesses and still take only 85 % of its tokens from them, since
  every round adds one token of the main model's own.
- accepted per round: the guesses kept over the rounds in which something was guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_TIMED_TOKENS = 8  # fewer tokens give no meaningful rate: no speedup is claimed, none recorded


@dataclass(frozen=True, slots=True)
class AnswerFigures:
    """One answer's numbers as every view shows them; None where a number is not known."""

    tokens: int
    tok_s: float | None  # None: fewer than two tokens, no span to divide by
    plain_tok_s: float | None  # the main model alone at this context, when measured
    speedup: float | None
    speedup_range: tuple[float, float] | None  # what plain's measured spread allows the speedup to be
    proposed: int
    accepted: int
    acceptance: float | None  # None: nothing was proposed
    draft_share: float | None  # None: no token came from the draft model
    prompt_share: float | None  # None: no token came from prompt lookup
    accepted_per_round: float | None  # None: no guessing round, or an answer stored before it was counted


def answer_figures(
    *,
    tokens: int,
    tok_s: float | None,
    plain_tok_s: float | None,
    proposed: int,
    accepted: int,
    drafting_rounds: int | None,
    from_prompt: int = 0,
    drafted: bool = True,
    plain_range: tuple[float, float] | None = None,
) -> AnswerFigures:
    """The figures from an answer's counts. `drafted`: the draft (or prompt lookup) ran for this
    answer, so a speedup may be claimed; `from_prompt`: accepted tokens that prompt lookup guessed;
    `plain_range`: the range plain's speed is in, slowest first. An answer of fewer than
    `MIN_TIMED_TOKENS` tokens claims no speedup: its rate is mostly the first round's."""
    rate = tok_s if tok_s and tok_s > 0 else None
    plain = plain_tok_s if plain_tok_s and plain_tok_s > 0 else None
    from_draft = max(accepted - from_prompt, 0)
    judged = bool(rate and plain and drafted and proposed > 0 and tokens >= MIN_TIMED_TOKENS)
    low, high = plain_range or (0.0, 0.0)
    return AnswerFigures(
        tokens=tokens,
        tok_s=rate,
        plain_tok_s=plain,
        speedup=rate / plain if judged and rate and plain else None,
        speedup_range=_shown_range(rate / high, rate / low) if judged and rate and 0 < low <= high else None,
        proposed=proposed,
        accepted=accepted,
        acceptance=accepted / proposed if proposed > 0 else None,
        draft_share=min(from_draft / tokens, 1.0) if tokens and from_draft else None,
        prompt_share=min(from_prompt / tokens, 1.0) if tokens and from_prompt else None,
        accepted_per_round=accepted / drafting_rounds if drafting_rounds else None,
    )


def _shown_range(low: float, high: float) -> tuple[float, float] | None:
    """A speedup's range, or None where its ends are the same to the digits shown."""
    return None if speedup_text(low) == speedup_text(high) else (low, high)


def stream_rate(tokens: int, first: float | None, last: float) -> float:
    """Tokens after the first over first-to-last token time; 0.0 when there is no span."""
    span = last - first if first is not None else 0.0
    return (tokens - 1) / span if tokens > 1 and span > 0 else 0.0


def speed_number(tok_s: float | None) -> str:
    """A speed without its unit: whole numbers from 100, one decimal from 0.1, two figures under;
    never a bare 0 for a slow but real speed."""
    if not tok_s or tok_s <= 0:
        return "—"
    if round(tok_s, 1) >= 100:
        return f"{tok_s:.0f}"
    if tok_s >= 0.1:
        return f"{tok_s:.1f}"
    return f"{tok_s:.2g}"


def speed_text(tok_s: float | None) -> str:
    """Every speed the app shows: "112 tok/s", "40.0 tok/s", "0.7 tok/s", "— tok/s"."""
    return f"{speed_number(tok_s)} tok/s"


def speedup_text(speedup: float) -> str:
    return f"{speedup:.2f}×"


def speedup_range_note(sure: tuple[float, float] | None) -> str:
    """What follows a speedup where its range is known: " (1.62–1.98×)", else nothing."""
    return f" ({sure[0]:.2f}–{sure[1]:.2f}×)" if sure else ""


def percent_text(share: float) -> str:
    return f"{share:.0%}"


def per_round_text(accepted_per_round: float) -> str:
    return f"{accepted_per_round:.2f}"
