"""A write that fails (a full disk above all) leaves nothing half-written and raises its own
error, never the rollback's; drafts live per conversation and outlast the store."""

from __future__ import annotations

import sqlite3

import pytest

from app.engine.store.conversations import ConversationStore
from app.engine.store.drafts import Drafts
from app.engine.store.transcript import Role
from app.engine.store.write_failure import is_disk_full, message_not_sent
from tests.engine.store.schema_v3 import write_v3_database

DISK_FULL = "database or disk is full"


def fill_disk(store: ConversationStore) -> None:
    """SQLite's own page limit: past it, a write fails with SQLITE_FULL as on a full disk."""
    (pages,) = store.db.execute("PRAGMA page_count").fetchone()
    store.db.execute(f"PRAGMA max_page_count={pages}")


class FailingConnection:
    """The store's connection with a failing INSERT and a ROLLBACK that rolls back, then raises."""

    def __init__(self, db: sqlite3.Connection, fails_on: str, error: sqlite3.Error) -> None:
        self.real, self.fails_on, self.error = db, fails_on, error

    @property
    def in_transaction(self) -> bool:
        return self.real.in_transaction

    def close(self) -> None:
        self.real.close()

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql.startswith(self.fails_on):
            raise self.error
        if sql == "ROLLBACK":
            self.real.execute(sql)
            raise sqlite3.OperationalError("cannot rollback - no transaction is active")
        return self.real.execute(sql, *args)


def count(path, table: str) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        db.close()


def test_a_full_disk_raises_its_own_error_and_writes_nothing(store):
    cid = store.create("chat")
    fill_disk(store)
    with pytest.raises(sqlite3.OperationalError) as caught:
        store.append(cid, Role.USER, "otters " * 5000)
    assert str(caught.value) == DISK_FULL, "the disk-full error comes through as it is"
    assert is_disk_full(caught.value), "it is recognised as a full disk"
    assert count(store.path, "messages") == 0
    store.db.execute("PRAGMA max_page_count=1000000")  # space again: the store goes on
    assert store.append(cid, Role.USER, "otters"), "the store writes again once there is space"
    assert count(store.path, "messages") == 1, "exactly the one message is saved"


def test_a_failing_rollback_never_hides_the_failed_insert(store, caplog):
    cid = store.create("chat")
    store.db = FailingConnection(store.db, "INSERT INTO messages", sqlite3.OperationalError(DISK_FULL))
    with pytest.raises(sqlite3.OperationalError) as caught:
        store.append(cid, Role.USER, "otters")
    assert str(caught.value) == DISK_FULL
    assert any("Rolling back also failed" in note for note in caught.value.__notes__)
    assert "cannot rollback" in caplog.text
    assert count(store.path, "messages") == 0, "nothing half-written is left"
    assert not store.db.in_transaction, "no transaction is left open"


def test_a_grouped_write_commits_all_or_nothing(store):
    store.db = FailingConnection(store.db, "INSERT INTO messages", sqlite3.OperationalError(DISK_FULL))
    with pytest.raises(sqlite3.OperationalError), store.transaction():
        cid = store.create("new chat")
        store.append(cid, Role.USER, "first words")
    assert count(store.path, "conversations") == 0  # no empty conversation is left behind


def test_the_reason_names_a_full_disk_or_says_the_real_one_with_the_path(tmp_path):
    path = tmp_path / "c.sqlite3"
    full = message_not_sent(sqlite3.OperationalError(DISK_FULL), path)
    assert full.startswith("The disk is full — your message was not sent and is still in the box.")
    assert is_disk_full(OSError(28, "No space left on device"))
    other = message_not_sent(sqlite3.OperationalError("disk I/O error"), path)
    assert "disk I/O error" in other, "the reason is given"
    assert str(path) in other, "the database's path is named"
    assert "still in the box" in other, "the user is told the text is still in the box"


def test_drafts_are_kept_per_conversation_and_outlast_the_store(tmp_path):
    path = tmp_path / "c.sqlite3"
    store = ConversationStore(path)
    a, b = store.create("a"), store.create("b")
    drafts = Drafts(store)
    drafts.put(None, "for a new chat")
    drafts.put(a, "half a thought")
    drafts.put(b, "   ")  # blank: nothing to keep
    store.close()
    again = Drafts(ConversationStore(path))
    assert (again.get(None), again.get(a), again.get(b)) == ("for a new chat", "half a thought", "")
    again.put(a, "a whole thought")
    assert again.get(a) == "a whole thought"
    again.store.delete(a)
    assert again.get(a) == "", "the deleted chat's draft is gone"
    assert count(path, "drafts") == 1, "the new chat's draft stays"  # the new chat's draft stays
    again.clear(None)
    assert again.get(None) == ""


def test_a_version_three_database_opens_and_keeps_drafts(tmp_path):
    path = tmp_path / "v3.sqlite3"
    write_v3_database(path)
    store = ConversationStore(path)
    Drafts(store).put(1, "more about otters")
    assert Drafts(store).get(1) == "more about otters", "drafts work on an old database"
    assert len(store.load(1).messages) == 2, "its messages are untouched"


AS_TYPED = "before\x00after \u202eright to left\u202c \u200fmark " + "x" * 7000


def test_drafts_come_back_exactly_as_typed_with_nul_and_direction_marks(tmp_path):
    path = tmp_path / "c.sqlite3"
    drafts = Drafts(ConversationStore(path))
    drafts.put(None, AS_TYPED)
    drafts.put(1, "é\x00" * 10)
    drafts.store.close()
    again = Drafts(ConversationStore(path))
    assert again.get(None) == AS_TYPED, "the whole draft, past the NUL"
    assert again.get(None, limit=8000) == AS_TYPED, "read with a cap it does not reach"
    assert again.get(None, limit=9) == AS_TYPED[:9], "a cap cuts by characters"
    assert again.get(1, limit=3) == "é\x00é", "a cap through a two-byte character keeps whole ones"
    assert again.get(None, limit=10) == "before\x00aft"
    assert Drafts(again.store).get(None, limit=20) == AS_TYPED[:20]
    lone = "half \ud800 a pair"
    again.put(None, lone)
    assert again.get(None, limit=100) == "half \ufffd a pair", "a lone surrogate becomes U+FFFD"


def test_messages_come_back_exactly_as_typed(tmp_path):
    path = tmp_path / "c.sqlite3"
    store = ConversationStore(path)
    chat = store.create("as typed")
    store.append(chat, Role.USER, AS_TYPED)
    store.close()
    again = ConversationStore(path)
    assert [t.text for t in again.load(chat).turns()] == [AS_TYPED], "NUL and direction marks kept"
