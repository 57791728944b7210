"""The connection test's results, one row per machine, and the words that explain them."""

from __future__ import annotations

import ipaddress

from PySide6.QtGui import QBrush
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from app.engine.distributed.hosts import is_private_link
from app.engine.distributed.memory_split import HostShare, Verdict, gb
from app.engine.distributed.probe import ProbeResult
from app.ui.common.platform_words import this_machine
from app.ui.common.theme import current_theme

COLUMNS = ("Machine", "Connection", "MLX", "SpecChat", "Free memory", "Its part of the main model")
MACHINE, CONNECTION, MLX, SPECCHAT, FREE, FIT = range(len(COLUMNS))
FIT_WORDS = {Verdict.FITS: "Fits", Verdict.TIGHT: "Fits, but tightly", Verdict.NO: "Does not fit"}


def link_words(ip: str) -> str:
    """What kind of connection an address is, as a person would call it."""
    if not is_private_link(ip):
        return "not private"
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    if address.is_loopback:
        return f"{this_machine()} only"
    if address.is_link_local:
        return "direct cable (Thunderbolt)"
    return "home or office network"


class HostsTable(QTableWidget):
    """Rows fill in as machines answer; a problem is tinted, with the whole reason as a tooltip."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self.setHorizontalHeaderLabels(COLUMNS)
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.setWordWrap(True)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(CONNECTION, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(FIT, QHeaderView.ResizeMode.Stretch)

    def show_hosts(self, names: list[str], waiting: str = "Not tested yet") -> None:
        self.setRowCount(len(names))
        for row, name in enumerate(names):
            label = f"{name} ({this_machine()})" if row == 0 else name
            for column, text in enumerate((label, waiting, "", "", "", "")):
                self.setItem(row, column, QTableWidgetItem(text))
        self.resizeRowsToContents()

    def text(self, row: int, column: int) -> str:
        item = self.item(row, column)
        return item.text() if item is not None else ""

    def _set(self, row: int, column: int, text: str, tip: str = "", problem: str = "") -> None:
        item = QTableWidgetItem(text)
        item.setToolTip(tip or text)
        theme = current_theme()
        if problem:
            bg, fg = (
                (theme.error_bg, theme.error_text)
                if problem == "error"
                else (theme.warning_bg, theme.warning_text)
            )
            item.setBackground(QBrush(bg))
            item.setForeground(QBrush(fg))
        self.setItem(row, column, item)

    def show_result(self, row: int, result: ProbeResult) -> None:
        info = result.info
        if info is None:
            self._set(row, CONNECTION, f"Not reachable\n{result.problem}", problem="error")
            for column in (MLX, SPECCHAT, FREE):
                self._set(row, column, "—")
        else:
            self._set(
                row, CONNECTION, f"Reachable ({info.hostname})", f"{info.platform}, Python {info.python}"
            )
            for column, name, version in (
                (MLX, "MLX", info.mlx_version or "not installed"),
                (SPECCHAT, "SpecChat", info.specchat_version),
            ):
                tip = (result.mismatch or "") if name in result.differs else ""
                self._set(row, column, version, tip, "error" if tip else "")
            self._set(row, FREE, f"{gb(info.free_memory)} of {gb(info.total_memory)}")
        self.resizeRowToContents(row)

    def show_fit(self, shares: list[HostShare]) -> None:
        for row, share in enumerate(shares[: self.rowCount()]):
            verdict = share.verdict
            if verdict is Verdict.UNKNOWN:
                self._set(row, FIT, f"Needs {gb(share.need)}; free memory not known yet", share.explain())
                continue
            words = f"{FIT_WORDS[verdict]}: needs {gb(share.need)} of {gb(share.free or 0)} free"
            problem = {Verdict.NO: "error", Verdict.TIGHT: "warning"}.get(verdict, "")
            self._set(row, FIT, words, share.explain(), problem)


def summary(results: list[ProbeResult], shares: list[HostShare], note: str | None = None) -> str:
    """Plain words: what to fix first, what will not fit, or ready; then any advice."""
    fix = [f"{r.host}: {r.problem}" for r in results if r.problem]
    fix += [f"{r.host}: {r.mismatch}" for r in results if r.mismatch]
    full = [f"{s.host}: {s.explain()}." for s in shares if s.verdict is Verdict.NO]
    tight = [s.host for s in shares if s.verdict is Verdict.TIGHT]
    parts = []
    if fix:
        parts.append("Fix these before using these machines:\n" + "\n".join(f"• {line}" for line in fix))
    if full:
        parts.append(
            "Its part of the main model does not fit here; add a machine or choose a shorter context:\n"
            + "\n".join(f"• {line}" for line in full)
        )
    if not parts:
        parts.append("Every machine answered with the same versions, and each part of the model fits.")
        if tight:
            parts[0] = (
                f"Every machine answered. Memory is tight on {', '.join(tight)}: "
                "close other apps there, or choose a shorter context."
            )
    if note:
        parts.append(note)
    return "\n".join(parts)
