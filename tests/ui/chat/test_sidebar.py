"""The conversations list: chats that share a title are told apart, and renaming one starts from
its own title, not from what the row adds to it."""

from __future__ import annotations

import time

from app.engine.store.conversations import Summary
from app.ui.chat.sidebar import ID, TITLE, Sidebar


def test_chats_of_one_title_are_told_apart_by_when_they_were_written(qtbot):
    sidebar = Sidebar()
    qtbot.addWidget(sidebar)
    now = time.time()
    sidebar.set_conversations(
        [
            Summary(1, "Write a haiku", now),
            Summary(2, "Write a haiku", now - 3 * 86400),
            Summary(3, "Other", now),
        ],
        current=1,
    )
    rows = [sidebar.model.item(r) for r in range(sidebar.model.rowCount())]
    shown = [r.text() for r in rows]
    assert shown[0] != shown[1], "two chats of one title read differently"
    assert all(s.startswith("Write a haiku · ") for s in shown[:2]), "each keeps its title first"
    assert shown[2] == "Other", "a title of its own is shown as it is"
    assert [r.data(TITLE) for r in rows[:2]] == ["Write a haiku"] * 2, "the title itself is kept for Rename"
    assert [r.data(ID) for r in rows] == [1, 2, 3]
