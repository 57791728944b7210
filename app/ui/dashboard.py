"""The speedup dashboard: a dock that charts the current generation as it streams.

It listens to the bridge's batches itself and keeps only the messages of the generation it was
told to follow, so the chat controller needs no changes. Numbers come from the engine-side
`Telemetry`; each chart keeps its drawn values in plain attributes (`points`, `reference`) so
tests can check what is shown without looking at pixels.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import (
    QDockWidget, QFileDialog, QGridLayout, QLabel, QPushButton, QVBoxLayout, QWidget,
)

from app.engine.events import RoundEvent, TokenEvent
from app.engine.telemetry import Telemetry, export_report
from app.engine.worker import WorkerMessage

ACCENT = QColor("#3b82f6")
REFERENCE = QColor("#ef4444")


class Chart(QWidget):
    """A small line or bar chart painted with QPainter; `points` are (x, y) in data units."""

    def __init__(self, title: str, kind: str = "line", y_label: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title, self.kind, self.y_label = title, kind, y_label
        self.points: list[tuple[float, float]] = []
        self.reference: float | None = None  # a dashed horizontal line (the plain baseline)
        self.x_labels: list[str] = []
        self.setMinimumSize(220, 150)

    def set_data(self, points: list[tuple[float, float]], reference: float | None = None,
                 x_labels: list[str] | None = None) -> None:
        self.points, self.reference, self.x_labels = list(points), reference, list(x_labels or [])
        self.update()

    def paintEvent(self, _event) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        p.fillRect(self.rect(), pal.base())
        p.setPen(pal.text().color())
        p.drawText(QRectF(8, 4, self.width() - 16, 18), Qt.AlignmentFlag.AlignLeft, self.title)
        area = QRectF(40, 26, max(10, self.width() - 52), max(10, self.height() - 48))
        p.setPen(QPen(pal.mid().color(), 1))
        p.drawRect(area)
        ys = [y for _, y in self.points] + ([self.reference] if self.reference else [])
        top = max(ys) * 1.15 if ys and max(ys) > 0 else 1.0
        p.setPen(pal.text().color())
        p.drawText(QRectF(0, area.top() - 6, 36, 14), Qt.AlignmentFlag.AlignRight, f"{top:.3g}")
        p.drawText(QRectF(0, area.bottom() - 8, 36, 14), Qt.AlignmentFlag.AlignRight, "0")
        if not self.points:
            p.drawText(area, Qt.AlignmentFlag.AlignCenter, "no data yet")
            return
        y_at = lambda y: area.bottom() - area.height() * y / top  # noqa: E731
        if self.kind == "bar":
            self._bars(p, area, y_at)
        else:
            self._line(p, area, y_at)
        if self.reference:
            p.setPen(QPen(REFERENCE, 1.5, Qt.PenStyle.DashLine))
            y = y_at(self.reference)
            p.drawLine(QPointF(area.left(), y), QPointF(area.right(), y))

    def _bars(self, p: QPainter, area: QRectF, y_at) -> None:
        n = len(self.points)
        width = area.width() / n
        for i, (_, y) in enumerate(self.points):
            bar = QRectF(area.left() + i * width + width * 0.15, y_at(y), width * 0.7, area.bottom() - y_at(y))
            p.fillRect(bar, ACCENT)
            label = self.x_labels[i] if i < len(self.x_labels) else str(i)
            p.setPen(self.palette().text().color())
            p.drawText(QRectF(area.left() + i * width, area.bottom() + 2, width, 16), Qt.AlignmentFlag.AlignHCenter, label)

    def _line(self, p: QPainter, area: QRectF, y_at) -> None:
        x0, x1 = self.points[0][0], self.points[-1][0]
        span = (x1 - x0) or 1.0
        path = QPainterPath()
        for i, (x, y) in enumerate(self.points):
            pt = QPointF(area.left() + area.width() * (x - x0) / span, y_at(y))
            path.moveTo(pt) if i == 0 else path.lineTo(pt)
        p.setPen(QPen(ACCENT, 2))
        p.drawPath(path)
        p.setPen(self.palette().text().color())
        p.drawText(QRectF(area.left(), area.bottom() + 2, area.width(), 16), Qt.AlignmentFlag.AlignRight,
                   f"{x1:.3g} {self.y_label}".strip())

    def png(self) -> bytes:
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        self.grab().save(buffer, "PNG")
        return bytes(data.data())


class Dashboard(QDockWidget):
    """Follows one generation at a time (`follow`); `on_batch` takes the bridge's batches."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Speedup dashboard", parent)
        self.setObjectName("dashboard")
        self.request: int | None = None
        self.telemetry = Telemetry()
        self.rate = Chart("Tokens per second (dashed: plain)", "line", "s")
        self.acceptance = Chart("Acceptance by draft position", "bar")
        self.histogram = Chart("Accepted drafts per round", "bar")
        self.k_chart = Chart("Draft length k per round", "line", "rounds")
        self.summary = QLabel("No generation yet.")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.export_button = QPushButton("Export report…")
        self.export_button.clicked.connect(self._ask_export)
        body = QWidget()
        column = QVBoxLayout(body)
        column.addWidget(self.summary)
        grid = QGridLayout()
        for i, chart in enumerate(self.charts.values()):
            grid.addWidget(chart, i // 2, i % 2)
        column.addLayout(grid, 1)
        column.addWidget(self.export_button, 0, Qt.AlignmentFlag.AlignRight)
        self.setWidget(body)

    @property
    def charts(self) -> dict[str, Chart]:
        return {"Tokens per second": self.rate, "Acceptance by position": self.acceptance,
                "Accepted per round": self.histogram, "Draft length over time": self.k_chart}

    def follow(self, request: int, plain_tok_s: float | None) -> None:
        """Start charting a new generation; the baseline is the main's plain speed, if known."""
        self.request = request
        self.telemetry = Telemetry(plain_tok_s=plain_tok_s)
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
        if fed:
            self.refresh()

    def refresh(self) -> None:
        t = self.telemetry
        self.rate.set_data(t.tok_s, t.plain_tok_s)
        rates = t.acceptance_by_position
        self.acceptance.set_data([(i + 1, r) for i, r in enumerate(rates)], x_labels=[str(i + 1) for i in range(len(rates))])
        self.histogram.set_data([(a, n) for a, n in enumerate(t.histogram)], x_labels=[str(a) for a in range(len(t.histogram))])
        self.k_chart.set_data([(float(r), float(k)) for r, k in t.k_series])
        self.summary.setText(self.summary_text())

    def summary_text(self) -> str:
        s = self.telemetry.summary()
        if not s.tokens:
            return "Waiting for tokens…" if self.request is not None else "No generation yet."
        baseline = (f"plain {s.plain_tok_s:.1f} tok/s → <b>{s.achieved_speedup:.2f}×</b>" if s.achieved_speedup
                    else "plain speed not measured yet for this model")
        oracle = (f"best fixed k = {s.oracle_k} would give {s.oracle_speedup:.2f}×" if s.oracle_k
                  else "oracle: not enough drafting rounds yet")
        return (f"<b>{s.tok_s:.1f} tok/s</b> · {baseline}<br>{oracle} · acceptance {s.acceptance:.0%}"
                f" · {s.mean_accepted:.2f} accepted per drafting round")

    def export(self, folder: Path) -> Path:
        """report.md with one PNG per chart, and rounds.csv of the raw per-round data."""
        return export_report(self.telemetry, folder, {name: c.png() for name, c in self.charts.items()})

    def _ask_export(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export report to folder")
        if folder:
            self.export(Path(folder))
