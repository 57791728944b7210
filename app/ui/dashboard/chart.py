"""A small chart painted with QPainter, whose drawn values stay readable as plain attributes.

Tests check `points`, `reference` and the labels instead of pixels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPointF, QRectF, Qt
from PySide6.QtGui import QPainter, QPainterPath, QPaintEvent, QPen
from PySide6.QtWidgets import QWidget

from app.ui.common.theme import current_theme


class Chart(QWidget):
    """A small line or bar chart painted with QPainter; `points` are (x, y) in data units."""

    def __init__(
        self,
        title: str,
        kind: str = "line",
        y_label: str = "",
        parent: QWidget | None = None,
        *,
        x_axis: str = "",
        y_axis: str = "",
    ) -> None:
        super().__init__(parent)
        self.title, self.kind, self.y_label = title, kind, y_label  # y_label: the last x value's unit
        self.x_axis, self.y_axis = x_axis, y_axis  # what each axis measures, with its unit
        self.points: list[tuple[float, float]] = []
        self.reference: float | None = None  # a dashed horizontal line (the plain baseline)
        self.reference_label = ""  # drawn above the dashed line
        self.x_labels: list[str] = []
        self.setMinimumSize(220, 150)

    def set_data(
        self,
        points: Sequence[tuple[float, float]],
        reference: float | None = None,
        x_labels: list[str] | None = None,
    ) -> None:
        self.points, self.reference, self.x_labels = list(points), reference, list(x_labels or [])
        self.update()

    def paintEvent(self, _event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        p.fillRect(self.rect(), pal.base())
        theme = current_theme()
        p.setPen(pal.text().color())
        p.drawText(QRectF(8, 4, self.width() - 16, 18), Qt.AlignmentFlag.AlignLeft, self.title)
        area = QRectF(56, 26, max(10, self.width() - 68), max(10, self.height() - 62))
        p.setPen(QPen(theme.border, 1))
        p.drawRect(area)
        self._axis_titles(p, area)
        ys = [y for _, y in self.points] + ([self.reference] if self.reference else [])
        top = max(ys) * 1.15 if ys and max(ys) > 0 else 1.0
        p.setPen(pal.text().color())
        p.drawText(QRectF(16, area.top() - 6, 36, 14), Qt.AlignmentFlag.AlignRight, f"{top:.3g}")
        p.drawText(QRectF(16, area.bottom() - 8, 36, 14), Qt.AlignmentFlag.AlignRight, "0")
        if not self.points:
            p.drawText(area, Qt.AlignmentFlag.AlignCenter, "no data yet")
            return

        def y_at(y: float) -> float:
            return area.bottom() - area.height() * y / top

        if self.kind == "bar":
            self._bars(p, area, y_at)
        else:
            self._line(p, area, y_at)
        if self.reference:
            p.setPen(QPen(theme.reference, 1.5, Qt.PenStyle.DashLine))
            y = y_at(self.reference)
            p.drawLine(QPointF(area.left(), y), QPointF(area.right(), y))
            if self.reference_label:
                p.drawText(
                    QRectF(area.left() + 4, y - 16, area.width() - 8, 14),
                    Qt.AlignmentFlag.AlignLeft,
                    self.reference_label,
                )

    def _axis_titles(self, p: QPainter, area: QRectF) -> None:
        """The x axis's title under its labels, the y axis's turned up along the left edge."""
        p.setPen(current_theme().muted)
        p.drawText(
            QRectF(area.left(), area.bottom() + 18, area.width(), 16),
            Qt.AlignmentFlag.AlignHCenter,
            self.x_axis,
        )
        p.save()
        p.translate(2, area.bottom())
        p.rotate(-90)
        p.drawText(QRectF(0, 0, area.height(), 14), Qt.AlignmentFlag.AlignHCenter, self.y_axis)
        p.restore()
        p.setPen(self.palette().text().color())

    def _bars(self, p: QPainter, area: QRectF, y_at: Callable[[float], float]) -> None:
        n = len(self.points)
        width = area.width() / n
        for i, (_, y) in enumerate(self.points):
            bar = QRectF(
                area.left() + i * width + width * 0.15, y_at(y), width * 0.7, area.bottom() - y_at(y)
            )
            p.fillRect(bar, current_theme().accent)
            label = self.x_labels[i] if i < len(self.x_labels) else str(i)
            p.setPen(self.palette().text().color())
            p.drawText(
                QRectF(area.left() + i * width, area.bottom() + 2, width, 16),
                Qt.AlignmentFlag.AlignHCenter,
                label,
            )

    def _line(self, p: QPainter, area: QRectF, y_at: Callable[[float], float]) -> None:
        x0, x1 = self.points[0][0], self.points[-1][0]
        span = (x1 - x0) or 1.0
        path = QPainterPath()
        for i, (x, y) in enumerate(self.points):
            pt = QPointF(area.left() + area.width() * (x - x0) / span, y_at(y))
            path.moveTo(pt) if i == 0 else path.lineTo(pt)
        p.setPen(QPen(current_theme().accent, 2))
        p.drawPath(path)
        p.setPen(self.palette().text().color())
        p.drawText(
            QRectF(area.left(), area.bottom() + 2, area.width(), 16),
            Qt.AlignmentFlag.AlignRight,
            f"{x1:.3g} {self.y_label}".strip(),
        )

    def png(self) -> bytes:
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        self.grab().save(buffer, "PNG")
        return bytes(data.data())
