"""A damaged conversations file: the store opens anyway, keeps the file aside, salvages rows."""

from __future__ import annotations

from app.engine.store.conversations import ConversationStore
from app.engine.store.transcript import Role

PAGE = 4096


def write_history(path, conversations=40, messages=3):
    """Several pages' worth of conversations, checkpointed so the main file holds everything."""
    s = ConversationStore(path)
    expected = {}
    for i in range(conversations):
        c = s.create(f"chat {i}")
        expected[c] = [(s.append(c, Role.USER, f"words {i}.{j} " + "x" * 1500), j) for j in range(messages)]
    s.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    s.close()
    return expected


def damaged_copies(path):
    return sorted(p for p in path.parent.iterdir() if p.name.startswith(f"{path.name}.damaged-"))


def test_a_file_of_zeros_is_moved_aside_and_a_fresh_one_opened(tmp_path):
    path = tmp_path / "c.sqlite3"
    path.write_bytes(b"\0" * (PAGE * 8))
    (tmp_path / "c.sqlite3-wal").write_bytes(b"\0" * 100)
    s = ConversationStore(path)
    r = s.recovery
    assert r is not None, "a damaged database is recovered, not a crash"
    assert r.conversations == 0, "nothing readable means no conversations"
    assert not r.complete, "the recovery is not called complete"
    assert "not a database" in r.reason
    assert r.moved_to.read_bytes() == b"\0" * (PAGE * 8)  # kept as it was, never deleted
    assert (tmp_path / f"{r.moved_to.name}-wal").exists()  # its companion went with it
    cid = s.create("after")
    s.close()
    again = ConversationStore(path)
    assert again.recovery is None, "a recovered store opens cleanly next time"
    assert [c.id for c in again.list()] == [cid], "the chat made after the recovery is kept"


def test_a_file_truncated_mid_page_gives_back_the_conversations_on_surviving_pages(tmp_path):
    path = tmp_path / "c.sqlite3"
    expected = write_history(path)
    data = path.read_bytes()
    assert len(data) > PAGE * 20
    cut = (len(data) // PAGE // 2) * PAGE + PAGE // 2  # the middle of a later page
    path.write_bytes(data[:cut])
    s = ConversationStore(path)
    r = s.recovery
    assert r is not None and r.moved_to.read_bytes() == data[:cut]
    assert r.moved_to.parent == path.parent, "the damaged file is kept next to the database"
    assert path.exists(), "a new database takes its place"
    assert r.conversations > 0, "some conversations are recovered"
    assert r.messages < len(expected) * 3, "not every message survives the cut"
    assert not r.complete, "the recovery is not called complete"
    titles = {c.id: c.title for c in s.list()}
    for cid in list(expected)[:5]:  # the first conversations live on the first pages
        assert titles[cid] == f"chat {cid - 1}"
        loaded = s.load(cid)
        assert [(m.id, m.position) for m in loaded.messages] == expected[cid]
        assert loaded.messages[0].content.startswith(f"words {cid - 1}.0 ")
    for cid, title in titles.items():  # whatever came back came back unchanged, with its id
        assert title in (f"chat {cid - 1}", "Recovered messages")
        for m in s.load(cid).messages:
            assert (m.id, m.position) in expected[cid]
            assert m.content == f"words {cid - 1}.{m.position} " + "x" * 1500


def test_a_corrupted_header_page_is_moved_aside_and_its_rows_read_from_the_pages(tmp_path):
    path = tmp_path / "c.sqlite3"
    expected = write_history(path, conversations=5)
    data = bytearray(path.read_bytes())
    data[:100] = bytes(range(100))
    path.write_bytes(bytes(data))
    s = ConversationStore(path)
    assert s.recovery is not None and s.recovery.moved_to.read_bytes() == bytes(data)
    assert sorted(c.id for c in s.list()) == sorted(expected)
    fresh = s.create("fresh")
    assert s.list()[0].title == "fresh", "a new chat goes to the top of the list"
    assert fresh not in expected, "a new chat gets a new id"


def test_a_damaged_schema_page_is_moved_aside(tmp_path):
    path = tmp_path / "c.sqlite3"
    write_history(path, conversations=5)
    data = bytearray(path.read_bytes())
    data[100:PAGE] = b"\xff" * (PAGE - 100)  # the header survives, the table of tables does not
    path.write_bytes(bytes(data))
    s = ConversationStore(path)
    assert s.recovery is not None and s.recovery.moved_to.exists()
    assert s.recovery.conversations == 5 and s.recovery.messages == 15  # found on the table pages
