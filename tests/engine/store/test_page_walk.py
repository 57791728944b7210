"""Page 1 destroyed, the data pages intact: the conversations come back from a walk over the
table pages, which needs neither the header nor the schema page."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from app.engine.store.conversations import ConversationStore
from app.engine.store.page_walk import decode_record, tables_of, walk
from app.engine.store.schema import SCHEMA_VERSION
from app.engine.store.transcript import MessageState, Role

LONG = 9000  # longer than a 4096-byte page holds: the rest lies on overflow pages


def write_history(path, conversations=30, page_size=None):
    """`conversations` chats of a question and an answer; every third answer is long."""
    if page_size:
        db = sqlite3.connect(path)
        db.execute(f"PRAGMA page_size={page_size}")
        db.execute("VACUUM")
        db.close()
    s = ConversationStore(path)
    expected = {}
    for i in range(conversations):
        c = s.create(f"chat {i}", system_prompt=f"be brief {i}")
        answer = f"answer {i} " + ("z" * LONG if i % 3 == 0 else "ok")
        s.append(c, Role.USER, f"question {i}")
        m = s.append(c, Role.ASSISTANT, "", MessageState.PARTIAL)
        s.checkpoint(m, answer, state=MessageState.COMPLETE)
        expected[c] = (f"chat {i}", f"be brief {i}", [f"question {i}", answer])
    s.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    s.close()
    return expected


def destroy_first_page(path, size):
    data = bytearray(path.read_bytes())
    data[:size] = bytes(size)
    path.write_bytes(bytes(data))


def assert_came_back(s, expected, at_least):
    came_back = {c.id for c in s.list()} & set(expected)
    assert len(came_back) >= at_least
    for cid in came_back:
        c = s.load(cid)
        assert (c.title, c.system_prompt, [m.content for m in c.messages]) == expected[cid]
        assert [m.role for m in c.messages] == [Role.USER, Role.ASSISTANT]


@pytest.mark.parametrize("page_size", [None, 8192])
def test_thirty_conversations_come_back_with_page_one_zeroed(tmp_path, page_size):
    path = tmp_path / "c.sqlite3"
    expected = write_history(path, page_size=page_size)
    destroy_first_page(path, page_size or 4096)
    damaged = path.read_bytes()
    s = ConversationStore(path)
    r = s.recovery
    assert r is not None and r.moved_to.read_bytes() == damaged  # the damaged file is kept as it was
    assert r.conversations == 30, "all 30 conversations are recovered"
    assert r.messages == 60, "all 60 messages are recovered"
    assert not r.complete, "a damaged file's recovery is never called complete"
    assert_came_back(s, expected, at_least=25)
    assert s.schema_version == SCHEMA_VERSION
    new = s.create("after the salvage")  # the fresh file takes new conversations past the old ids
    assert new not in expected


def test_a_wal_supplies_what_the_main_file_does_not_hold_yet(tmp_path):
    path, copy = tmp_path / "c.sqlite3", tmp_path / "copy.sqlite3"
    expected = write_history(path, conversations=10)
    s = ConversationStore(path)
    s.db.execute("PRAGMA wal_autocheckpoint=0")
    late = s.create("only in the wal")
    s.append(late, Role.USER, "kept in the wal")
    shutil.copy(path, copy)  # copied while open: the new rows are only in the WAL
    shutil.copy(f"{path}-wal", f"{copy}-wal")
    s.close()
    destroy_first_page(copy, 4096)
    tables = tables_of(ConversationStore(tmp_path / "schema.sqlite3").db)
    found = walk(copy, tables)
    assert set(found["conversations"]) == {*expected, late}
    assert found["conversations"][late][1] == "only in the wal"
    assert [v[4] for v in found["messages"].values() if v[1] == late] == ["kept in the wal"]


def test_nothing_is_made_up_from_a_file_of_noise(tmp_path):
    path = tmp_path / "noise.sqlite3"
    path.write_bytes(bytes((i * 7919 + 13) % 251 for i in range(4096 * 16)))
    tables = tables_of(ConversationStore(tmp_path / "schema.sqlite3").db)
    assert all(rows == {} for rows in walk(path, tables).values())


def test_a_record_must_be_exactly_its_bytes():
    good = bytes([3, 0x11, 1, ord("a"), ord("b"), 7])  # header 3: text of 2, an int of 1 byte
    assert decode_record(good) == ["ab", 7]
    assert decode_record(good + b"x") is None  # a trailing byte: not one record
    assert decode_record(good[:-1]) is None  # cut short
    assert decode_record(bytes([2, 10])) is None  # serial type 10 is reserved
