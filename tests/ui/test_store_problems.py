"""The window opens on a conversations file in every bad state, made for real, and says what is
wrong and what to do; nothing in the file is lost or changed, and a refused message stays in the
box. The window's store is made as at start-up, on the data folder's file."""

from __future__ import annotations

import os
import sqlite3

from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QMessageBox

from app.devtools.fake_engine import FakeEngine
from app.engine.library.discovery import Sources
from app.engine.store.conversations import ConversationStore
from app.engine.store.schema import SCHEMA_VERSION
from app.engine.store.transcript import Role
from app.ui.main_window import MainWindow
from tests.engine.store.test_open_problems import make_read_only, make_writable
from tests.engine.store.test_page_walk import destroy_first_page
from tests.engine.store.test_page_walk import write_history as write_long_history

FILE = "conversations.sqlite3"  # where the data folder keeps them


def write_history(path, conversations=3):
    path.parent.mkdir(parents=True, exist_ok=True)
    s = ConversationStore(path)
    for i in range(conversations):
        s.append(s.create(f"chat {i}"), Role.USER, f"hello {i}")
    s.close()
    return path


def start(qtbot, home, store: ConversationStore | None = None) -> MainWindow:
    """The window as start-up makes it, its store on the data folder's file unless given one; the
    synthetic engine and an empty model folder keep it quick."""
    (home / "models").mkdir(parents=True, exist_ok=True)
    window = MainWindow(
        engine_factory=lambda emit: FakeEngine(emit),
        store=store,
        settings=QSettings(str(home / "s.ini"), QSettings.Format.IniFormat),
        sources=Sources(None, None, home / "models", use_hub=False),
        restore_pair=False,
    )
    qtbot.addWidget(window)
    window.show()
    return window


def notice(w: MainWindow) -> QMessageBox:
    box = w.store_notice.box
    assert box is not None and box.isVisible(), "the window did not say what is wrong"
    return box


def titles(path):
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return sorted(t for (t,) in db.execute("SELECT title FROM conversations"))
    finally:
        db.close()


def test_a_locked_file_says_so_keeps_the_message_and_retry_carries_on(qtbot, specchat_home):
    path = write_history(specchat_home / FILE)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # a second SpecChat or a backup tool holds the write lock
    w = start(qtbot, specchat_home, ConversationStore(path, lock_wait=0.2))
    box = notice(w)
    assert "SpecChat is open elsewhere, or another program holds your conversations" in box.text()
    assert w.store_notice.retry_button is not None, "a locked file offers Retry"
    assert w.sidebar.model.rowCount() == 3, "the conversations read before the lock are listed"
    w.load_pair("/m/main", "/m/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    box.close()
    w.composer.editor.setPlainText("keep me")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    assert w.composer.editor.toPlainText() == "keep me"  # refused, and still in the box
    assert any("was not sent" in m for m in w.banner.messages)
    qtbot.waitUntil(lambda: notice(w) is not None)  # the refusal brought Retry back

    qtbot.mouseClick(w.store_notice.retry_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: notice(w) is not None)  # still held: the message comes back
    assert w.store.problem is not None
    other.execute("ROLLBACK")
    qtbot.mouseClick(w.store_notice.retry_button, Qt.MouseButton.LeftButton)
    assert w.store.problem is None, "Retry clears the problem"
    assert not box.isVisible(), "Retry closes the message"
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    assert w.composer.editor.toPlainText() == ""
    assert w.sidebar.model.rowCount() == 4
    w.close()
    assert titles(path) == ["chat 0", "chat 1", "chat 2", "keep me"]


def test_a_read_only_file_is_shown_and_says_new_messages_cannot_be_saved(qtbot, specchat_home):
    path = write_history(specchat_home / FILE)
    before = path.read_bytes()
    make_read_only(path)
    try:
        w = start(qtbot, specchat_home)
        assert "new messages cannot be saved" in notice(w).text()
        assert w.sidebar.model.rowCount() == 3
        w.sidebar.delete_requested.emit(w.sidebar.ids()[0])  # refused, and said
        assert w.sidebar.model.rowCount() == 3
        assert any("was not deleted" in m for m in w.banner.messages)
        box = notice(w)
        box.close()
        w.composer.editor.setPlainText("a draft that cannot be kept")
        w.close()  # the refused draft is said, but no message keeps the app open after its window
        qtbot.wait(50)
        assert not box.isVisible()
    finally:
        make_writable(path)
    assert path.read_bytes() == before


def test_a_folder_in_the_files_place_is_named_and_left_alone(qtbot, specchat_home):
    (specchat_home / FILE).mkdir(parents=True)
    (specchat_home / FILE / "mine.txt").write_text("keep")
    w = start(qtbot, specchat_home)
    text = notice(w).text()
    assert "A folder is where SpecChat keeps its conversations file" in text, (
        "the message says a folder stands where the file goes"
    )
    assert "Retry" in text, "the message offers Retry"
    assert w.isVisible(), "the window opens anyway"
    assert w.sidebar.model.rowCount() == 0, "no conversation is listed"
    w.close()
    assert (specchat_home / FILE / "mine.txt").read_text() == "keep"


def test_a_symlink_loop_in_the_files_place_is_named_and_left_alone(qtbot, specchat_home):
    specchat_home.mkdir(parents=True)
    (specchat_home / FILE).symlink_to(specchat_home / FILE)
    w = start(qtbot, specchat_home)
    assert "a link that leads back to itself" in notice(w).text()
    w.close()
    assert os.readlink(specchat_home / FILE) == str(specchat_home / FILE)


def test_a_newer_schema_says_so_in_words_and_changes_nothing(qtbot, specchat_home):
    path = write_history(specchat_home / FILE)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 3}")
    db.commit()
    db.close()
    before = path.read_bytes()
    w = start(qtbot, specchat_home)
    assert "made by a newer SpecChat; nothing was changed" in notice(w).text()
    assert w.store_notice.retry_button is None, "a newer file offers no Retry"
    assert w.sidebar.model.rowCount() == 3, "its conversations are listed"
    w.close()
    assert path.read_bytes() == before


def test_a_destroyed_first_page_gives_back_the_conversations(qtbot, specchat_home):
    specchat_home.mkdir(parents=True)
    write_long_history(specchat_home / FILE)
    destroy_first_page(specchat_home / FILE, 4096)
    w = start(qtbot, specchat_home)
    assert w.recovery_notice is not None, "the window says it recovered conversations"
    assert "recovered 30 conversations" in w.recovery_notice.text(), "the message says how many"
    assert w.sidebar.model.rowCount() == 30, "every recovered conversation is listed"
    assert w.store_notice.box is None, "no problem message is left"
    w.close()
