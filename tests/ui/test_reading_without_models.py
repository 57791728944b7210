"""Saved conversations stay readable, searchable and exportable while no model is loaded."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog

from app.engine.store.conversations import ConversationStore
from app.engine.store.transcript import MessageState, Role
from tests.ui.test_main_window import make_window


def _saved(home) -> ConversationStore:
    store = ConversationStore(home / "c.sqlite3")
    cid = store.create("Tea")
    store.append(cid, Role.USER, "How long should green tea steep?")
    store.append(cid, Role.ASSISTANT, "About two minutes.", state=MessageState.COMPLETE)
    other = store.create("Bikes")
    store.append(other, Role.USER, "How do I fix a puncture?")
    store.close()
    return store


def _click(qtbot, w, title: str) -> None:
    row = next(i for i in range(w.sidebar.model.rowCount()) if w.sidebar.model.item(i).text() == title)
    index = w.sidebar.model.index(row, 0)
    qtbot.mouseClick(
        w.sidebar.view.viewport(), Qt.MouseButton.LeftButton, pos=w.sidebar.view.visualRect(index).center()
    )


def test_a_saved_conversation_opens_searches_and_exports_with_no_model(
    qtbot, specchat_home, tmp_path, monkeypatch
):
    _saved(specchat_home)
    w = make_window(qtbot, specchat_home)  # no model folder holds anything: nothing can load
    qtbot.waitUntil(lambda: w.stack.currentWidget() is w.welcome, timeout=10_000)
    assert w.controller.pair is None, "no pair is loaded"
    assert w.sidebar.model.rowCount() == 2, "both saved conversations are listed"
    _click(qtbot, w, "Tea")
    assert w.stack.currentWidget() is w.view
    assert "About two minutes." in w.view.toPlainText()
    w.sidebar.search.setText("puncture")
    assert [w.sidebar.model.item(i).text() for i in range(w.sidebar.model.rowCount())] == ["Bikes"]
    target = tmp_path / "tea.md"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    w.export("md")
    assert "About two minutes." in target.read_text(encoding="utf-8")
    w.close()


def test_the_last_conversation_reopened_at_start_is_shown_with_no_model(qtbot, specchat_home):
    _saved(specchat_home)
    w = make_window(qtbot, specchat_home)
    _click(qtbot, w, "Bikes")
    w.close()
    again = make_window(qtbot, specchat_home)
    qtbot.waitUntil(lambda: not again.background.jobs, timeout=10_000)
    assert again.stack.currentWidget() is again.view
    assert "How do I fix a puncture?" in again.view.toPlainText()
    again.close()
