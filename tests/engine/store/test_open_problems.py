"""A conversations file that cannot be opened for writing, made for real: the store opens anyway,
shows what it can read, refuses every write, says why, and leaves the file exactly as it was."""

from __future__ import annotations

import os
import sqlite3
import subprocess

import pytest

from app.engine.store.conversations import ConversationStore
from app.engine.store.opening import Trouble, problem_for
from app.engine.store.schema import SCHEMA_VERSION
from app.engine.store.transcript import Role

WAIT = 0.2  # seconds a held lock is waited for at open: short, so the tests stay quick


def write_history(path, conversations=3):
    s = ConversationStore(path)
    for i in range(conversations):
        c = s.create(f"chat {i}")
        s.append(c, Role.USER, f"hello {i}")
    s.close()
    return path


def assert_refuses_writes(s):
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        s.create("new")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        s.append(1, Role.USER, "more")


def titles(path):
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return sorted(t for (t,) in db.execute("SELECT title FROM conversations"))
    finally:
        db.close()


def test_a_write_lock_held_elsewhere_shows_the_conversations_and_retry_opens_it(tmp_path):
    path = write_history(tmp_path / "c.sqlite3")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another SpecChat, or a backup tool, writing
    s = ConversationStore(path, lock_wait=WAIT)
    assert s.problem is not None, "a locked database is a problem, not a crash"
    assert s.problem.trouble is Trouble.LOCKED, "the problem says the file is locked"
    assert s.problem.can_retry, "a lock can be retried"
    assert "SpecChat is open elsewhere, or another program holds your conversations" in s.problem.text
    assert "3 conversations it could read are shown" in s.problem.text
    assert [c.title for c in s.list()] == ["chat 2", "chat 1", "chat 0"]
    assert s.load(1).messages[0].content == "hello 0"
    assert_refuses_writes(s)
    assert not s.retry(), "retry fails while another program holds the lock"
    assert s.problem.trouble is Trouble.LOCKED, "the problem still says locked"  # still held: still read-only
    other.execute("ROLLBACK")
    assert s.retry(), "retry succeeds once the lock is released"
    assert s.problem is None, "the problem is cleared"
    s.create("written once free")
    s.close()
    assert titles(path) == ["chat 0", "chat 1", "chat 2", "written once free"]


def test_an_exclusive_lock_that_blocks_reading_opens_empty_and_read_only(tmp_path):
    path = write_history(tmp_path / "c.sqlite3")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA locking_mode=EXCLUSIVE")
    other.execute("BEGIN EXCLUSIVE")
    other.execute("UPDATE conversations SET title='held' WHERE id=1")
    other.execute("COMMIT")  # the exclusive lock stays until the connection closes
    s = ConversationStore(path, lock_wait=WAIT)
    assert s.problem is not None and s.problem.trouble is Trouble.LOCKED
    assert "No conversations could be read" in s.problem.text
    assert s.list() == []
    assert_refuses_writes(s)
    other.close()
    assert s.retry(), "retry succeeds once the other program closes"
    assert [c.title for c in s.list()] == ["chat 2", "chat 1", "held"], "the chats read back after the retry"


def make_read_only(path):
    """chmod is ignored for root, so root makes the file immutable, which binds root too."""
    path.chmod(0o444)
    if os.geteuid() == 0 and os.access(path, os.W_OK):
        subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if os.access(path, os.W_OK):
        pytest.skip("cannot make a file read-only here: running as root without chattr")


def make_writable(path):
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)
    path.chmod(0o644)


def test_a_read_only_file_is_read_and_new_messages_are_refused(tmp_path):
    path = write_history(tmp_path / "c.sqlite3")
    before = path.read_bytes()
    make_read_only(path)
    try:
        s = ConversationStore(path, lock_wait=WAIT)
        assert s.problem is not None and s.problem.trouble is Trouble.READ_ONLY
        assert "new messages cannot be saved" in s.problem.text
        assert len(s.list()) == 3, "a read-only file's chats are still listed"
        assert s.load(2).messages[0].content == "hello 1", "and still readable"
        assert_refuses_writes(s)
        assert not s.retry()
    finally:
        make_writable(path)
    assert path.read_bytes() == before
    assert s.retry(), "retry succeeds once the file is writable"
    assert s.create("writable again"), "new chats can be created again"


def test_sqlite_refusing_a_write_is_told_as_read_only(tmp_path):
    """What SQLite says for a file it opened read-only (a read-only disk, for one) is told as
    read-only, whatever the file's permissions claimed."""
    path = write_history(tmp_path / "c.sqlite3")
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as refused:
        db.execute("PRAGMA user_version=9")
    db.close()
    assert problem_for(refused.value, path).trouble is Trouble.READ_ONLY


def test_a_folder_in_the_files_place_is_left_alone(tmp_path):
    path = tmp_path / "c.sqlite3"
    path.mkdir()
    (path / "keep.txt").write_text("mine")
    s = ConversationStore(path, lock_wait=WAIT)
    assert s.problem is not None and s.problem.trouble is Trouble.FOLDER
    assert "folder" in s.problem.text and "Retry" in s.problem.text
    assert s.list() == [], "a folder in the database's place shows no chats"
    assert (path / "keep.txt").read_text() == "mine", "the user's folder is left untouched"
    assert_refuses_writes(s)
    (path / "keep.txt").unlink()
    path.rmdir()
    assert s.retry(), "retry succeeds once the folder is gone"
    assert s.create("fresh"), "a new chat can be created"
    assert s.list()[0].title == "fresh", "the new chat is listed"


def test_a_symlink_loop_in_the_files_place_is_left_alone(tmp_path):
    path = tmp_path / "c.sqlite3"
    path.symlink_to(path)
    s = ConversationStore(path, lock_wait=WAIT)
    assert s.problem is not None and s.problem.trouble is Trouble.LINK_LOOP
    assert "link that leads back to itself" in s.problem.text
    assert path.is_symlink() and os.readlink(path) == str(path)
    assert_refuses_writes(s)


def test_a_newer_schema_is_read_and_never_changed(tmp_path):
    path = write_history(tmp_path / "c.sqlite3")
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.execute("ALTER TABLE conversations ADD COLUMN folder TEXT")  # what a newer version might add
    db.commit()
    db.close()
    before = path.read_bytes()
    s = ConversationStore(path, lock_wait=WAIT)
    assert s.problem is not None, "a database from a newer SpecChat is a problem, not a crash"
    assert s.problem.trouble is Trouble.NEWER, "the problem says the file is newer"
    assert not s.problem.can_retry, "retrying cannot help a newer file"
    assert "made by a newer SpecChat; nothing was changed" in s.problem.text
    assert len(s.list()) == 3, "the newer file's chats are still listed"
    assert s.load(3).messages[0].content == "hello 2", "and still readable"
    assert_refuses_writes(s)
    s.close()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.sqlite3"]
