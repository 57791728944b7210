"""Conversations list: new, search, rename, delete. It only shows summaries, never contents."""

from __future__ import annotations

import time
from collections import Counter

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QInputDialog,
    QLineEdit,
    QListView,
    QMenu,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.store.conversations import Summary

ID = Qt.ItemDataRole.UserRole
TITLE = Qt.ItemDataRole.UserRole + 1  # the title itself, where the row adds when it was written
# SQLite's LIKE '%…%' costs the searched text's length times the query's, on every keystroke:
# a pasted query is cut here, where the user sees it, so a search stays linear in the history.
SEARCH_CHARS = 100


def _when(updated: float) -> str:
    """When a chat was last written in, short: "14:02" today, "30 Nov 14:02" before."""
    same_day = time.localtime(updated)[:3] == time.localtime()[:3]
    return time.strftime("%H:%M" if same_day else "%d %b %H:%M", time.localtime(updated))


class Sidebar(QWidget):
    selected = Signal(int)
    new_requested = Signal()
    rename_requested = Signal(int, str)
    delete_requested = Signal(int)
    search_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.new_button = QPushButton("New chat")
        self.search = QLineEdit(placeholderText="Search conversations")
        self.search.setClearButtonEnabled(True)
        self.search.setMaxLength(SEARCH_CHARS)
        self.view, self.model = QListView(), QStandardItemModel(self)
        self.view.setModel(self.model)
        self.view.setEditTriggers(QListView.EditTrigger.NoEditTriggers)
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 0, 6)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.view, 1)
        self.new_button.clicked.connect(self.new_requested)
        self.search.textChanged.connect(self.search_changed)
        self.view.clicked.connect(lambda index: self.selected.emit(int(index.data(ID))))
        self.view.customContextMenuRequested.connect(self._menu)

    def set_conversations(self, items: list[Summary], current: int | None) -> None:
        self.model.clear()
        seen = Counter(s.title or "Untitled" for s in items)
        for s in items:
            title = s.title or "Untitled"
            # chats of one title are told apart by when they were last written in
            shown = f"{title} · {_when(s.updated)}" if seen[title] > 1 else title
            item = QStandardItem(shown)
            item.setData(s.id, ID)
            item.setData(title, TITLE)
            item.setToolTip(s.title)
            self.model.appendRow(item)
            if s.id == current:
                self.view.setCurrentIndex(item.index())

    def ids(self) -> list[int]:
        return [int(self.model.item(i).data(ID)) for i in range(self.model.rowCount())]

    def _menu(self, point: QPoint) -> None:
        index = self.view.indexAt(point)
        if not index.isValid():
            return
        cid, title = int(index.data(ID)), str(index.data(TITLE))
        menu = QMenu(self)
        rename, delete = menu.addAction("Rename…"), menu.addAction("Delete…")
        chosen = menu.exec(self.view.viewport().mapToGlobal(point))
        if chosen is rename:
            text, ok = QInputDialog.getText(self, "Rename conversation", "Title:", text=title)
            if ok and text.strip():
                self.rename_requested.emit(cid, text.strip())
        elif chosen is delete:
            sure = QMessageBox.question(
                self, "Delete conversation", f"Delete “{title}”? This cannot be undone."
            )
            if sure == QMessageBox.StandardButton.Yes:
                self.delete_requested.emit(cid)
