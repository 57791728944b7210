"""The speedup dashboard: a dock that charts the current generation as it streams, and a history.

It listens to the bridge's batches itself and keeps only the messages of the generation it was
told to follow. The charts come from the engine-side `Telemetry`; the headline numbers are the
answer's one record (`stats_words.figures`), read from the chat's own stats of the answer, so
they are the strip's and the history's. The best fixed draft length is an estimate from the
answer's rounds and says so, beside the draft arena's measured figure. The plain baseline arrives as
`BaselineStatus` news from the chat controller: the main model's plain speed at this answer's
context bucket, or that it is not known yet, or that it is being measured. The second tab is the
per-pair history from the database. Each chart keeps its drawn values in plain attributes
(`points`, `reference`) so tests can check what is shown without looking at pixels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QGridLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.engine.decoding.events import GenerationFinished, RoundEvent, TokenEvent
from app.engine.features.arena import LOOKUP, ArenaResult, load_results
from app.engine.features.baselines import bucket_label
from app.engine.features.figures import (
    MIN_TIMED_TOKENS,
    AnswerFigures,
    per_round_text,
    percent_text,
    speed_text,
    speedup_range_note,
    speedup_text,
)
from app.engine.features.telemetry import Summary, Telemetry, export_report
from app.engine.protocol import WorkerMessage
from app.engine.store.history import RunHistory
from app.engine.store.transcript import AnswerStats
from app.ui.common.error_banner import reason, show_error_dialog
from app.ui.common.plain_speed import BaselineStatus
from app.ui.common.stats_words import NO_DRAFT_MODES, TOO_SHORT, draft_share, figures
from app.ui.dashboard.chart import Chart
from app.ui.dashboard.history_view import HistoryView

__all__ = ["Chart", "Dashboard"]


class Dashboard(QDockWidget):
    """Follows one generation at a time (`follow`); `on_batch` takes the bridge's batches."""

    def __init__(self, parent: QWidget | None = None, history: RunHistory | None = None) -> None:
        super().__init__("Speedup dashboard", parent)
        self.setObjectName("dashboard")
        self.request: int | None = None
        self.error_box: QMessageBox | None = None  # the last failed export's message
        self.telemetry = Telemetry()
        self.baseline: BaselineStatus | None = None  # the followed generation's context and plain speed
        self.source: Callable[[], AnswerStats] | None = None  # the chat's stats of the followed answer
        self._arena: tuple[tuple[str, str], ArenaResult | None] | None = None  # (main, draft) -> result
        self.rate = Chart("Tokens per second", "line", "s", x_axis="time (s)", y_axis="tokens/s")
        self.acceptance = Chart(
            "Acceptance by draft position", "bar", x_axis="position in the draft", y_axis="accepted (0–1)"
        )
        self.histogram = Chart(
            "Accepted drafts per round", "bar", x_axis="draft tokens accepted", y_axis="rounds"
        )
        self.k_chart = Chart(
            "Draft length k per round", "line", "rounds", x_axis="round", y_axis="draft length (tokens)"
        )
        self.summary = QLabel("No generation yet.")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.baseline_note = QLabel("")
        self.baseline_note.setWordWrap(True)
        self.export_button = QPushButton("Export report…")
        self.export_button.clicked.connect(self._ask_export)
        live = QWidget()
        column = QVBoxLayout(live)
        column.addWidget(self.summary)
        column.addWidget(self.baseline_note)
        grid = QGridLayout()
        for i, chart in enumerate(self.charts.values()):
            grid.addWidget(chart, i // 2, i % 2)
        column.addLayout(grid, 1)
        self.history = HistoryView(history)
        self.tabs = QTabWidget()
        self.tabs.addTab(live, "This answer")
        self.tabs.addTab(self.history, "History")
        body = QWidget()
        outer = QVBoxLayout(body)
        outer.setContentsMargins(4, 4, 4, 4)
        outer.addWidget(self.tabs, 1)
        outer.addWidget(self.export_button, 0, Qt.AlignmentFlag.AlignRight)
        self.setWidget(body)

    @property
    def charts(self) -> dict[str, Chart]:
        return {
            "Tokens per second": self.rate,
            "Acceptance by position": self.acceptance,
            "Accepted per round": self.histogram,
            "Draft length over time": self.k_chart,
        }

    def follow(
        self,
        request: int,
        plain_tok_s: float | None = None,
        source: Callable[[], AnswerStats] | None = None,
    ) -> None:
        """Start charting a new generation; its plain baseline comes with its context size.
        `source` gives the chat's stats of the answer, whose record the headline shows (without
        one, the record is computed from the rounds seen here)."""
        self.request = request
        self.baseline = None
        self.source = source
        self.telemetry = Telemetry(plain_tok_s=plain_tok_s)
        self.refresh()

    def clear(self) -> None:
        """Forget the followed generation: its charts described a pair that is being replaced."""
        self.request = None
        self.baseline = None
        self.source = None
        self.telemetry = Telemetry()
        self.refresh()

    def answer_stats(self) -> AnswerStats | None:
        return self.source() if self.source is not None else None

    def _finished(self) -> bool:
        stats = self.answer_stats()
        return stats is not None and stats.finish_reason is not None

    def figures(self) -> AnswerFigures:
        """The followed answer's one record, as the strip and the line under the answer show it."""
        stats = self.answer_stats()
        return self.telemetry.figures() if stats is None else figures(stats, self.telemetry.plain_tok_s)

    def arena_result(self) -> ArenaResult | None:
        """The draft arena's last measurement of the followed answer's pair, if it ran one."""
        stats = self.answer_stats()
        if stats is None or not stats.main or stats.mode in NO_DRAFT_MODES:
            return None
        pair = (stats.main, stats.draft or LOOKUP)
        if self._arena is None or self._arena[0] != pair:
            found = next((r for r in load_results(pair[0]) if r.candidate == pair[1] and not r.error), None)
            self._arena = (pair, found)
        return self._arena[1]

    def set_baseline(self, status: BaselineStatus) -> None:
        """News about plain speed: the followed generation's own, or a measurement's for its bucket."""
        if status.request is not None:
            if status.request != self.request:
                return
        elif self.baseline is None or (status.main, status.bucket) != (
            self.baseline.main,
            self.baseline.bucket,
        ):
            return
        else:  # keep saying which context this answer is at
            status = replace(
                status, context_tokens=self.baseline.context_tokens, request=self.baseline.request
            )
        self.baseline = status
        if status.plain_tok_s is not None:
            self.telemetry.plain_tok_s = status.plain_tok_s
        self.refresh()

    def on_batch(self, batch: tuple[WorkerMessage, ...]) -> None:
        fed = False
        for message in batch:
            if message.request != self.request:
                continue
            if isinstance(message.event, TokenEvent):
                self.telemetry.token(message.event)
                fed = True
            elif isinstance(message.event, RoundEvent):
                self.telemetry.round(message.event)
                fed = True
            elif isinstance(message.event, GenerationFinished):
                fed = True  # the answer's final record
        if fed:
            self.refresh()

    def refresh(self) -> None:
        t = self.telemetry
        self.rate.set_data(t.tok_s, t.plain_tok_s)
        self.rate.reference_label = (
            f"plain {speed_text(t.plain_tok_s)} at this context" if t.plain_tok_s else ""
        )
        rates = t.acceptance_by_position
        self.acceptance.set_data(
            [(i + 1, r) for i, r in enumerate(rates)], x_labels=[str(i + 1) for i in range(len(rates))]
        )
        self.histogram.set_data(
            [(a, n) for a, n in enumerate(t.histogram)], x_labels=[str(a) for a in range(len(t.histogram))]
        )
        self.k_chart.set_data(t.k_series)  # as it is: new pairs every batch were a long answer's churn
        self.summary.setText(self.summary_text())
        self.baseline_note.setText(self.baseline_text())

    def baseline_text(self) -> str:
        b = self.baseline
        if b is None:
            return ""
        where = f"~{b.context_tokens:,} tokens of context"
        if b.measuring:
            return f"Measuring plain speed at {where}…"
        if b.plain_tok_s is not None:
            sure = (
                f" ({speed_text(b.plain_range[0])} to {speed_text(b.plain_range[1])})"
                if b.plain_range
                else ""
            )
            return (
                f"Plain speed at {where}: {speed_text(b.plain_tok_s)}{sure}, measured on this machine for contexts "
                f"of {bucket_label(b.bucket)} tokens, under the load it has now."
            )
        return (
            f"Plain speed at {where} is not known under the load this computer has now: it is measured "
            "a few times in the background while you are idle."
        )

    def summary_text(self) -> str:
        f = self.figures()
        if not f.tokens:
            return "Waiting for tokens…" if self.request is not None else "No generation yet."
        sure = speedup_range_note(f.speedup_range)
        baseline = (
            f"plain {speed_text(f.plain_tok_s)} → <b>{speedup_text(f.speedup)}</b>{sure}"
            if f.speedup is not None and f.plain_tok_s
            else "no speedup: the draft did not run"
            if not f.proposed
            else TOO_SHORT
            if f.tokens < MIN_TIMED_TOKENS and self._finished()
            else "speedup not measured yet: plain speed at this context, under this load, unknown"
        )
        lines = [f"<b>{speed_text(f.tok_s)}</b> · {baseline}"]
        guesses = []
        if f.acceptance is not None:
            guesses.append(f"acceptance {percent_text(f.acceptance)} of guesses kept")
        stats = self.answer_stats()
        share = draft_share(stats) if stats is not None else None
        if share is None and f.draft_share:
            share = f"{percent_text(f.draft_share)} from the draft"
        if share:
            guesses.append(share)
        if f.accepted_per_round is not None:
            guesses.append(f"{per_round_text(f.accepted_per_round)} accepted per drafting round")
        if guesses:
            lines.append(" · ".join(guesses))
        s = self.telemetry.summary(f)
        lines.append(self.best_k_text(s))
        return "<br>".join(lines)

    def best_k_text(self, s: Summary) -> str:
        """The oracle's best fixed k, an estimate from this answer's rounds, beside the arena's
        measurement of the same pair when there is one."""
        arena = self.arena_result()
        measured = (
            f" · the draft arena measured {speedup_text(arena.speedup)} with this draft" if arena else ""
        )
        if not s.oracle_k or s.oracle_speedup is None:
            return "best fixed draft length: not enough drafting rounds yet" + measured
        return (
            f"best fixed draft length k = {s.oracle_k}: estimated {speedup_text(s.oracle_speedup)} "
            f"(from this answer's rounds){measured}"
        )

    def export(self, folder: Path) -> Path:
        """report.md with one PNG per chart, rounds.csv of the raw per-round data, and the
        history: its table in the report, history.csv of every recorded answer, its chart."""
        history = self.history.export(folder)
        return export_report(
            self.telemetry,
            folder,
            {name: c.png() for name, c in self.charts.items()},
            appendix=history,
            figures=self.figures(),
        )

    def _ask_export(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export report to folder")
        if folder:
            self.export_to(Path(folder))

    def export_to(self, folder: Path) -> Path | None:
        """Export, or tell the user why the folder could not take the report."""
        try:
            return self.export(folder)
        except OSError as exc:
            self.error_box = show_error_dialog(
                self, "Report not exported", f"Could not export the report to {folder}: {reason(exc)}."
            )
            return None
