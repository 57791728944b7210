"""Live statistics from the engine's own timestamps, and the status strip that shows them.

Rates come from TokenEvent.time (the engine clock), never from when the UI painted, so a slow
repaint cannot make the model look slower. Speedup compares with the main model's plain speed
at this context length (app.engine.features.baselines) and only when the draft ran: plain rounds
inside a speculative answer are no baseline. Every number shown is read from the answer's one
record (`stats_words.figures`). The lines under and over an answer (its stats, its losslessness
verdict) are worded here too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from app.engine.decoding.events import GenerationFinished, Provenance, RoundEvent, TokenEvent
from app.engine.features.figures import (
    per_round_text,
    percent_text,
    speed_text,
    speedup_range_note,
    speedup_text,
    stream_rate,
)
from app.engine.store.transcript import AnswerStats, AnswerTurn, Verdict
from app.ui.common.stats_words import draft_share, figures, summary
from app.ui.common.theme import Theme, current_theme

GLOSSARY_HINT = "Help ▸ Glossary explains every term"
IDENTICAL, NEAR_TIE, DIVERGENCE = "#2e8540", "#c77700", "#c0392b"
MARKS = {
    Verdict.IDENTICAL: ("✓", IDENTICAL),
    Verdict.NEAR_TIE: ("≈", NEAR_TIE),
    Verdict.WIDE_MARGIN: ("✗", DIVERGENCE),
}


def stats_line(stats: AnswerStats) -> str:
    """An answer's numbers in one line (its tooltip), from its one record."""
    f = figures(stats)
    parts = [f"{stats.tokens} tokens"]
    if f.tok_s:
        parts.append(speed_text(f.tok_s))
    if stats.first_token_seconds is not None:
        parts.append(f"first token {stats.first_token_seconds * 1000:.0f} ms")
    if f.acceptance is not None:
        parts.append(f"acceptance {percent_text(f.acceptance)} of guesses kept")
    share = draft_share(stats)
    if share:
        parts.append(share)
    if f.accepted_per_round is not None:
        parts.append(f"{per_round_text(f.accepted_per_round)} accepted per drafting round")
    if f.speedup is not None and f.plain_tok_s:
        sure = speedup_range_note(f.speedup_range)
        parts.append(f"{speedup_text(f.speedup)}{sure} vs plain {speed_text(f.plain_tok_s)}")
    if stats.draft_stopped:
        parts.append(stats.draft_stopped)
    return " · ".join(parts)


def verdict_line(stats: AnswerStats, checking: bool) -> tuple[str, str] | None:
    """The line shown under an answer, and its colour ("" for the muted colour)."""
    if checking:
        return "Checking losslessness: replaying this answer greedily without the draft…", ""
    check = stats.lossless
    if check is None or not check.message:
        return None
    mark, colour = MARKS.get(check.verdict, ("", ""))
    if not mark:
        return f"Losslessness not checked: {check.message}", ""
    return f"{mark} Losslessness: {check.message}", colour


@dataclass
class LiveStats:
    """Accumulates one generation's numbers; `snapshot()` is what the strip and the message keep."""

    mode: str = "adaptive"
    plain_speed: float | None = None
    plain_range: tuple[float, float] | None = None  # where plain_speed lies 9 times in 10
    tokens: int = 0
    first_time: float | None = None
    last_time: float = 0.0
    rounds: int = 0
    drafting_rounds: int = 0  # rounds that proposed something
    proposed: int = 0
    accepted: int = 0
    lookup_accepted: int = 0  # of `accepted`, guessed by prompt lookup
    k: int = 0
    bypassed: bool = False
    rarely_right: tuple[int, int] | None = None  # (right, judged) when the draft is almost never right
    draft_stopped: str | None = None  # why drafting stopped (the draft's context ended)
    finished: GenerationFinished | None = None

    def token(self, e: TokenEvent) -> None:
        self.tokens += 1
        if self.first_time is None:
            self.first_time = e.time
        self.last_time = e.time

    def round(self, e: RoundEvent) -> None:
        self.rounds += 1
        self.drafting_rounds += e.k > 0
        self.proposed += e.k
        self.accepted += e.accepted
        self.lookup_accepted += e.accepted if e.source is Provenance.LOOKUP else 0
        decision = e.decision
        self.k = decision.k
        self.bypassed = decision.bypassed and self.mode in ("adaptive", "lookup")
        self.rarely_right = decision.draft_right
        self.draft_stopped = decision.draft_stopped or self.draft_stopped

    def finish(self, e: GenerationFinished) -> None:
        self.finished = e

    @property
    def stream_rate(self) -> float:
        """(tokens - 1) over first to last token: the rate plain baselines are measured as, and so
        the one speed an answer is shown and compared with."""
        return stream_rate(self.tokens, self.first_time, self.last_time)

    def snapshot(self) -> AnswerStats:
        # a speedup is claimed only against the main's plain speed at this context, and only when
        # the draft ran: plain rounds inside a speculative answer are no baseline (`figures`)
        data = AnswerStats(
            tokens=self.tokens,
            tokens_per_second=round(self.stream_rate, 2),
            first_token_seconds=round(self.first_time, 4) if self.first_time is not None else None,
            rounds=self.rounds,
            proposed=self.proposed,
            accepted=self.accepted,
            k=self.k,
            bypassed=self.bypassed,
            mode=self.mode,
            draft_rarely_right=self.rarely_right,
            draft_stopped=self.draft_stopped,
            plain_tokens_per_second=self.plain_speed or None,
            plain_low=self.plain_range[0] if self.plain_speed and self.plain_range else None,
            plain_high=self.plain_range[1] if self.plain_speed and self.plain_range else None,
            drafting_rounds=self.drafting_rounds,
            lookup_accepted=self.lookup_accepted,
        )
        f = figures(data)
        data = replace(
            data,
            acceptance=round(f.acceptance or 0.0, 4),
            mean_accepted=round(f.accepted_per_round or 0.0, 3),
            speedup=f.speedup,
        )
        if self.finished is None:
            return data
        s = self.finished.stats
        return replace(
            data,
            finish_reason=str(self.finished.reason),
            prompt_tokens=s.prompt_tokens,
            reused_tokens=s.reused_tokens,
            prefill_seconds=round(s.prefill_seconds, 4),
            decode_seconds=round(s.decode_seconds, 4),
            tokens=s.tokens,
        )


class StatusStrip(QWidget):
    """One line under the chat in plain words (`summary`), the numbers behind it in its tooltip,
    and a legend for the answer's colours."""

    FIELDS = ("state", "summary")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 2, 8, 2)
        self.labels = {name: QLabel("") for name in self.FIELDS}
        for name in self.FIELDS:
            # a long line is clipped (its numbers are in the tooltip) rather than widening the window
            self.labels[name].setMinimumWidth(1)
            layout.addWidget(self.labels[name])
        layout.addStretch(1)
        self.legend = QLabel("")
        layout.addWidget(self.legend)
        self.refused_on_hover = False  # View ▸ Show refused drafts on hover
        self.theme = current_theme()
        self.set_theme(self.theme)
        self.set_state("No model loaded")

    def set_refused_on_hover(self, on: bool) -> None:
        self.refused_on_hover = on
        self.set_theme(self.theme)

    def set_theme(self, theme: Theme) -> None:
        self.theme = theme
        # the legend promises refused guesses on hover only while they are shown there
        refused = "refused guess (on hover)" if self.refused_on_hover else "refused guess (hover off)"
        hint = "" if self.refused_on_hover else "\nTurn on View ▸ Show refused drafts on hover to see them."
        self.legend.setToolTip(GLOSSARY_HINT + hint)
        chips = (
            (theme.draft_bg, "from the draft"),
            (theme.lookup_bg, "from your prompt"),
        )
        self.legend.setText(
            " ".join(
                f'<span style="background:{bg.name()}; color:{theme.text.name()}">&nbsp;{words}&nbsp;</span>'
                for bg, words in chips
            )
            + f' <span style="color:{theme.rejected.name()}; text-decoration: underline dotted">'
            f"{refused}</span>"
        )

    def set_state(self, text: str) -> None:
        self.labels["state"].setText(text)

    def clear_stats(self) -> None:
        """Blank the numbers, leaving the state: they described an answer no longer current."""
        self.labels["summary"].setText("")
        self.labels["summary"].setToolTip("")

    @property
    def has_stats(self) -> bool:
        return bool(self.labels["summary"].text())

    def show_answer(self, answer: AnswerTurn | None) -> None:
        """A finished answer's numbers (the current conversation's last), or none: the strip never
        keeps numbers of an answer that is no longer on screen."""
        if answer is None or not answer.stats.tokens:
            self.clear_stats()
        else:
            self.show_stats(answer.stats)

    def show_stats(self, s: AnswerStats) -> None:
        self.labels["summary"].setText(summary(s))
        details = [stats_line(s)]
        if s.draft_rarely_right is not None and s.bypassed:
            right, judged = s.draft_rarely_right
            details.append(
                f"The draft model was right on {right} of the {judged} proposals judged so far, so it "
                "cannot speed this main model up (random weights, or another model family). It is "
                "still tried now and then; pick another draft in the model picker."
            )
        if s.proposed:
            details.append(f"Draft length now: {s.k} (how many words the draft guesses ahead).")
        self.labels["summary"].setToolTip("\n".join(details))

    def text(self) -> str:
        return " | ".join(self.labels[n].text() for n in self.FIELDS if self.labels[n].text())
