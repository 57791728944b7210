"""The dashboard's history tab: what speculation bought per model pair, across conversations.

Rows come from the `runs` table (app.engine.store.history): one per pair, prompt kind and
temperature. Each run holds its answer's own record (app.engine.features.figures), written as
everywhere else, so a row of one answer reads as that answer does under it; a row of several is
their mean, as its note says. The chart follows the chosen pair's speedup answer by answer,
against plain (1×). `rows` and the chart's `points` are plain attributes, so tests read what is
shown.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.engine.features.figures import per_round_text, percent_text, speed_text, speedup_text
from app.engine.store.history import (
    HistoryRow,
    RunHistory,
    aggregate,
    export_history,
    pair_label,
    speedup_series,
    temperature_label,
)
from app.ui.dashboard.chart import Chart

COLUMNS = ("Kind", "Temp.", "Answers", "Speedup", "Acceptance", "Accepted per round", "Speed")


class HistoryView(QWidget):
    def __init__(self, history: RunHistory | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.history = history
        self.rows: list[HistoryRow] = []
        self.pair = QComboBox()
        self.pair.currentIndexChanged.connect(lambda _i: self._show_pair())
        self.note = QLabel("")
        self.note.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.chart = Chart(
            "Speedup per answer, oldest first (dashed: plain = 1×)",
            "line",
            "answers",
            x_axis="answer",
            y_axis="speedup (×)",
        )
        top = QHBoxLayout()
        top.addWidget(QLabel("Pair:"))
        top.addWidget(self.pair, 1)
        column = QVBoxLayout(self)
        column.addLayout(top)
        column.addWidget(self.note)
        column.addWidget(self.table, 1)
        column.addWidget(self.chart, 2)
        self.refresh()

    def set_history(self, history: RunHistory | None) -> None:
        self.history = history
        self.refresh()

    def refresh(self) -> None:
        """Re-read the pairs (keeping the chosen one) and show its rows."""
        pairs = self.history.pairs() if self.history is not None else []
        current = self.pair.currentData()
        self.pair.blockSignals(True)
        self.pair.clear()
        for main, draft in pairs:
            self.pair.addItem(pair_label(main, draft), (main, draft))
        at = self.pair.findData(current) if current is not None else -1
        self.pair.setCurrentIndex(at if at >= 0 else 0 if pairs else -1)
        self.pair.blockSignals(False)
        self._show_pair()

    def selected(self) -> tuple[str, str] | None:
        data = self.pair.currentData()
        return (str(data[0]), str(data[1])) if data else None

    def _show_pair(self) -> None:
        chosen = self.selected()
        runs = self.history.runs(*chosen) if self.history is not None and chosen else []
        self.rows = aggregate(runs)
        self.table.setRowCount(len(self.rows))
        for i, r in enumerate(self.rows):
            cells = (
                r.kind,
                temperature_label(r.temperature),
                str(r.answers),
                speedup_text(r.speedup) if r.speedup else "plain speed not known",
                percent_text(r.acceptance) if r.acceptance is not None else "—",
                per_round_text(r.accepted_per_round) if r.accepted_per_round is not None else "—",
                speed_text(r.tok_s),
            )
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(
                    Qt.AlignmentFlag.AlignCenter
                    if j
                    else Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
                )
                self.table.setItem(i, j, item)
        self.chart.set_data(speedup_series(runs), 1.0 if runs else None)
        self.chart.reference_label = "plain = 1×"
        if not chosen:
            self.note.setText("No speculative answers recorded yet: each answer adds a row here.")
        else:
            n = sum(r.answers for r in self.rows)
            since = time.strftime("%Y-%m-%d", time.localtime(runs[0].created)) if runs else "—"
            self.note.setText(
                f"{n} answer{'s' * (n != 1)} with {pair_label(*chosen)} since {since}. A row of several "
                "answers shows their mean: speedups are geometric means over answers whose plain speed "
                "at their context length is known; acceptance and accepted per round are pooled."
            )

    def cell(self, row: int, column: str) -> str:
        item = self.table.item(row, COLUMNS.index(column))
        return item.text() if item is not None else ""

    def export(self, folder: Path) -> str:
        """history.csv of every pair's answers and this pair's chart; returns the report section."""
        runs = self.history.runs() if self.history is not None else []
        return export_history(folder, runs, self.chart.png() if self.chart.points else None)
