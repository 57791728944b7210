"""The server log pane: one row per request the local server answered, newest last.

Rows come from `ServedRecord`s, which the server reports on its own thread; app/ui/server/serving.py
hands them over through a queued signal, so this pane only ever runs on the GUI thread. A
double-click opens the served answer, read-only, in a chat view of its own.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDockWidget,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.engine.decoding.events import Provenance
from app.engine.features.figures import speed_number, speedup_text
from app.engine.store.provenance import Answer, Piece
from app.engine.store.transcript import AnswerTurn, MessageState, Transcript
from app.server.records import ServedRecord
from app.ui.chat.chat_view import ChatView

COLUMNS = ("Time", "Client", "Endpoint", "Tokens", "tok/s", "Speedup", "Result")
MAX_ROWS = 1000  # the oldest rows go first: the pane is a recent log, not a history
RESULTS = {
    "stop": "finished",
    "length": "finished (token limit)",
    "cancelled": "cancelled",
    "error": "failed",
}


REFUSALS = {
    400: "refused: a bad request",
    401: "refused: wrong or missing key",
    403: "refused: not from this computer's address",
    404: "refused: unknown model or address",
    413: "refused: request too large",
    415: "refused: not JSON",
    429: "turned away: too many waiting",
    503: "refused: no models loaded",
}


PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}  # the server's short names


def result_words(record: ServedRecord) -> str:
    if record.status >= 400:
        return f"{REFUSALS.get(record.status, 'failed')} ({record.status})"
    return RESULTS.get(record.finish_reason, record.finish_reason)


def row_texts(record: ServedRecord) -> tuple[str, ...]:
    """What a row shows; "—" where a figure is not known (no tokens, no plain speed)."""
    return (
        time.strftime("%H:%M:%S", time.localtime(record.time)),
        record.client,
        PATHS.get(record.endpoint, record.endpoint),
        str(record.tokens),
        speed_number(record.tokens_per_second),
        speedup_text(record.speedup_vs_plain) if record.speedup_vs_plain else "—",
        result_words(record),
    )


class ServerLog(QDockWidget):
    """A dock with the served requests; hidden until the server is first turned on."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Server log", parent)
        self.setObjectName("server-log")  # the window's saved state finds the dock by this name
        self.records: list[ServedRecord] = []
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setToolTip("Double-click a row to read the answer it was sent")
        self.table.cellDoubleClicked.connect(lambda row, _col: self.open_answer(row))
        self.empty = QLabel("No requests yet. Programs reach SpecChat at the address in the status bar.")
        self.empty.setWordWrap(True)
        body = QWidget()
        column = QVBoxLayout(body)
        column.setContentsMargins(4, 4, 4, 4)
        column.addWidget(self.empty)
        column.addWidget(self.table, 1)
        self.setWidget(body)
        self.answer_view: QDialog | None = None

    def add(self, record: ServedRecord) -> None:
        self.empty.hide()
        if len(self.records) >= MAX_ROWS:
            self.records.pop(0)
            self.table.removeRow(0)
        self.records.append(record)
        row = self.table.rowCount()
        self.table.insertRow(row)
        for col, text in enumerate(row_texts(record)):
            item = QTableWidgetItem(text)
            if 3 <= col <= 5:  # the figures
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.table.setItem(row, col, item)
        self.table.scrollToBottom()

    def row(self, row: int) -> tuple[str, ...]:
        """A row's texts as shown."""
        items = (self.table.item(row, col) for col in range(len(COLUMNS)))
        return tuple(item.text() if item is not None else "" for item in items)

    def open_answer(self, row: int) -> QDialog:
        """The served answer in a read-only chat view, with when and for whom it was written."""
        record = self.records[row]
        dialog = QDialog(self)
        dialog.setWindowTitle(f"Served answer · {row_texts(record)[0]} · {record.client}")
        answer = Answer()
        answer.add(Piece(record.text, Provenance.MAIN, 0))
        view = ChatView(Transcript([AnswerTurn(1, answer, state=MessageState.COMPLETE)]))
        view.refresh()
        header = QLabel(
            f"{PATHS.get(record.endpoint, record.endpoint)} · {record.prompt_tokens} prompt tokens · {record.tokens} tokens · "
            f"{result_words(record)}"
        )
        column = QVBoxLayout(dialog)
        column.addWidget(header)
        column.addWidget(view, 1)
        dialog.resize(640, 480)
        dialog.show()
        self.answer_view = dialog
        return dialog
