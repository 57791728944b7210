"""The composer's text is never lost: it stays until its turn is committed, a failed save is
said in words until dismissed, and unsent text is a draft per conversation that outlasts a quit."""

from __future__ import annotations

import sqlite3

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.ui.chat.text.long_text import MAX_CHARS
from tests.engine.store.test_write_failures import DISK_FULL, FailingConnection, count, fill_disk
from tests.ui.chat.test_long_paste import EVENT_S, timed
from tests.ui.test_main_window import make_window, type_and_send

FULL_SENTENCE = "The disk is full — your message was not sent and is still in the box."


def shown_failure(w) -> str:
    banner = w.banner
    # stays until the user dismisses it
    assert not banner.isHidden(), "the failure is shown in a banner"
    assert banner.messages, "the banner holds the failure's words"
    return banner.messages[-1]


def test_a_full_disk_keeps_the_message_in_the_box_and_says_so(qtbot, window):
    fill_disk(window.store)
    text = "Tell me about otters. " * 2000  # more than the database has room for
    type_and_send(qtbot, window, text)
    assert window.composer.editor.toPlainText() == text
    assert shown_failure(window).startswith(FULL_SENTENCE)
    assert count(window.store.path, "conversations") == 0, "no conversation is saved"
    assert count(window.store.path, "messages") == 0, "no message is saved"
    assert window.controller.conversation is None, "no conversation is opened"
    assert len(window.controller.transcript) == 0, "the chat shows no message"
    assert not window.controller.busy


def test_a_failed_save_whose_rollback_fails_too_keeps_the_earlier_turns(qtbot, window):
    window.controller.chat_settings = window.controller.chat_settings.__class__(max_tokens=5)
    type_and_send(qtbot, window, "First question")
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)
    store = window.store
    store.db = FailingConnection(store.db, "INSERT INTO messages", sqlite3.OperationalError(DISK_FULL))
    type_and_send(qtbot, window, "Second question")
    assert window.composer.editor.toPlainText() == "Second question"
    assert shown_failure(window).startswith(FULL_SENTENCE)
    stored = store.load(window.controller.conversation)
    assert [m.content for m in stored.messages][0] == "First question", "the earlier question stays saved"
    assert len(stored.messages) == 2, "the earlier answer stays saved"
    assert len(window.controller.transcript) == 2, "the chat still shows the earlier turns"
    assert not window.controller.busy, "the window is ready for another send"
    store.db = store.db.real  # space again: the same text sends, and only then leaves the box
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return)
    assert window.composer.editor.toPlainText() == ""
    assert store.load(window.controller.conversation).messages[2].content == "Second question"


def test_other_failures_give_the_reason_and_the_database(qtbot, window):
    store = window.store
    store.db = FailingConnection(store.db, "INSERT INTO messages", sqlite3.OperationalError("disk I/O error"))
    type_and_send(qtbot, window, "Hello")
    text = shown_failure(window)
    assert "disk I/O error" in text, "the reason is given"
    assert str(store.path) in text, "the database's file is named"
    assert "still in the box" in text, "the text is said to be still in the box"
    assert window.composer.editor.toPlainText() == "Hello"


def test_a_draft_outlasts_the_window_and_stays_with_its_conversation(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    a, b = w.store.create("About otters"), w.store.create("About seals")
    w.refresh_sidebar()
    w.composer.editor.setPlainText("a new chat, half written")
    assert w.controller.open(a)
    assert w.composer.editor.toPlainText() == ""
    w.composer.editor.setPlainText("otters hold hands while")
    w.close()  # quit without sending

    again = make_window(qtbot, specchat_home)  # reopens the conversation left open, with its draft
    assert again.controller.conversation == a
    assert again.composer.editor.toPlainText() == "otters hold hands while"
    assert again.controller.open(b), "the other conversation opens"
    assert again.composer.editor.toPlainText() == "", "it has no draft of its own"
    assert again.controller.open(a), "the first conversation opens again"
    assert again.composer.editor.toPlainText() == "otters hold hands while", "its draft comes back with it"
    again.controller.new_conversation()
    assert again.composer.editor.toPlainText() == "a new chat, half written"
    again.close()


def test_a_draft_is_saved_once_typing_stops_so_a_crash_keeps_it(qtbot, window):
    window.composer.editor.setPlainText("typed just before a crash")
    assert window.drafts.timer.isActive()  # saved after a pause, not on every keystroke

    def on_disk() -> str:
        db = sqlite3.connect(window.store.path)
        try:
            row = db.execute("SELECT text FROM drafts WHERE conversation_id=0").fetchone()
            return row[0] if row else ""
        finally:
            db.close()

    qtbot.waitUntil(lambda: on_disk() == "typed just before a crash", timeout=5000)


def test_sending_clears_the_draft(qtbot, window):
    window.controller.chat_settings = window.controller.chat_settings.__class__(max_tokens=5)
    window.composer.editor.setPlainText("send me")
    window.drafts.save()
    assert count(window.store.path, "drafts") == 1
    type_and_send(qtbot, window, "send me")
    assert window.composer.editor.toPlainText() == "", "sending empties the box"
    assert count(window.store.path, "drafts") == 0, "sending clears the saved draft"
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)
    window.drafts.save()
    assert count(window.store.path, "drafts") == 0


def test_a_draft_that_cannot_be_saved_is_said_once(qtbot, window):
    fill_disk(window.store)
    told = []
    window.drafts.failed.connect(told.append)
    for n in range(3):
        window.composer.editor.setPlainText(f"{n} " + "long words " * 2000)
        window.drafts.save()
    assert len(told) == 1, "the failure is said once"
    assert "could not be kept as a draft: the disk is full" in told[0], (
        "it says the draft could not be kept for a full disk"
    )
    assert shown_failure(window) == told[0]
    assert window.composer.editor.toPlainText().startswith("2 ")


def test_a_ten_megabyte_draft_is_cut_to_the_cap_and_switches_at_once(qtbot, specchat_home):
    """7 to 15 s of frozen window on every switch before: the whole line was laid out and saved."""
    w = make_window(qtbot, specchat_home)
    a, b = w.store.create("With a long draft"), w.store.create("Another")
    w.refresh_sidebar()
    assert w.controller.open(a)
    QApplication.clipboard().setText("x" * 10_000_000)  # one line, no spaces
    assert timed(w.composer.editor.paste) < EVENT_S
    kept = "x" * MAX_CHARS
    assert f"Only the first {MAX_CHARS:,} characters" in w.composer.long_note.text()
    w.drafts.save()
    for _ in range(2):
        assert timed(lambda: w.controller.open(b)) < EVENT_S
        assert w.composer.editor.toPlainText() == "", "the other conversation's box is empty"
        assert w.composer.long_bar.isHidden(), "no notice bar there"
        assert timed(lambda: w.controller.open(a)) < EVENT_S
        assert w.composer.editor.toPlainText() == kept  # nothing of what was kept is lost
        assert f"A long text ({MAX_CHARS:,} characters)" in w.composer.long_note.text()
    assert drafts_on_disk(w) == {a: kept}
    w.close()


def test_a_draft_longer_than_the_cap_from_an_older_version_is_cut_and_said(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    a = w.store.create("Saved by an older SpecChat")
    w.store.db.execute(
        "INSERT INTO drafts(conversation_id, text, updated) VALUES (?, ?, 0)", (a, "y" * 3_000_000)
    )
    assert timed(lambda: w.controller.open(a)) < EVENT_S
    assert w.composer.editor.toPlainText() == "y" * MAX_CHARS
    assert f"Only the first {MAX_CHARS:,} characters of this text are kept" in w.composer.long_note.text()
    w.close()


def drafts_on_disk(w) -> dict[int, str]:
    db = sqlite3.connect(w.store.path)
    try:
        return dict(db.execute("SELECT conversation_id, text FROM drafts").fetchall())
    finally:
        db.close()
