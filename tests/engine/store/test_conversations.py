"""Conversation storage: migrations, checkpoints, damage isolation, bad text, and SIGKILL safety."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from app.engine.store.conversations import SCHEMA_VERSION, ConversationError, ConversationStore, clean_text
from app.engine.store.transcript import AnswerStats, MessageState, Role


def test_schema_is_versioned_and_wal(store):
    assert store.schema_version == SCHEMA_VERSION
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_migrates_a_version_one_database(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    from app.engine.store.conversations import MIGRATIONS

    MIGRATIONS[0](db)
    db.execute("PRAGMA user_version=1")
    db.execute("INSERT INTO conversations(title, created, updated) VALUES ('old', 0, 0)")
    db.execute(
        "INSERT INTO messages(conversation_id, position, role, content, created, updated) VALUES (1,0,'user','hi',0,0)"
    )
    db.commit()
    db.close()
    s = ConversationStore(path)
    c = s.load(1)
    assert s.schema_version == SCHEMA_VERSION
    assert c.messages[0].content == "hi", "the old message's text is read"
    assert c.messages[0].stats == AnswerStats(), "a message saved before stats existed has empty stats"
    assert c.messages[0].tokens == "", "a message saved before tokens were kept has none"


def test_append_checkpoint_truncate_list_and_search(store):
    a = store.create("First")
    b = store.create("Second")
    question = store.append(a, Role.USER, "tell me about otters")
    mid = store.append(a, Role.ASSISTANT, "", state=MessageState.PARTIAL)
    store.checkpoint(
        mid,
        "Otters are",
        state=MessageState.PARTIAL,
        tokens="x",
        rejected=[(1, "cats")],
        stats=AnswerStats(tokens=2),
    )
    c = store.load(a)
    assert [m.role for m in c.messages] == ["user", "assistant"]
    assert c.messages[1].content == "Otters are", "the partial answer's text is kept"
    assert c.messages[1].state == "partial", "it is marked partial"
    assert c.messages[1].rejected == ((1, "cats"),), "the refused drafts are kept"
    assert c.messages[1].stats == AnswerStats(tokens=2), "the answer's stats are kept"
    assert [s.id for s in store.list()][0] == a  # most recently updated first
    assert [s.id for s in store.list("OTTER")] == [a]
    assert [s.id for s in store.list("Second")] == [b]
    store.truncate_after_message(a, question)
    assert len(store.load(a).messages) == 1
    store.rename(b, "Renamed")
    store.delete(a)
    assert [s.title for s in store.list()] == ["Renamed"]


def test_damaged_conversation_never_hides_the_others(store):
    good, bad = store.create("good"), store.create("bad")
    store.append(good, Role.USER, "fine")
    mid = store.append(bad, Role.ASSISTANT, "text survives")
    store.db.execute("UPDATE messages SET stats='{not json', rejected='7' WHERE id=?", (mid,))
    store.db.execute("UPDATE conversations SET settings='[' WHERE id=?", (bad,))
    store.db.execute("UPDATE messages SET content=CAST(X'66ff6f' AS TEXT) WHERE conversation_id=?", (good,))
    assert {s.title for s in store.list()} == {"good", "bad"}
    broken = store.load(bad)
    assert broken.damaged, "bad settings mark the chat as damaged"
    assert broken.messages[0].content == "text survives", "the messages' text survives"
    assert broken.messages[0].stats == AnswerStats(), "stats that cannot be read are left empty"
    assert store.load(good).messages[0].content == "f\ufffdo"
    with pytest.raises(ConversationError):
        store.load(999)


def test_bad_text_is_replaced_consistently(store):
    cid = store.create("t\ud800")
    store.append(cid, Role.USER, "a\udcffb")
    assert clean_text("a\udcffb") == clean_text(b"a\xffb") == "a\ufffdb"
    c = store.load(cid)
    assert c.title == "t\ufffd" and c.messages[0].content == "a\ufffdb"
    exported = json.loads(store.export_json(cid))
    assert exported["messages"][0]["content"] == "a\ufffdb"
    assert "## User" in store.export_markdown(cid)


def test_refused_drafts_are_saved_clean_whether_or_not_one_needs_it(store):
    cid = store.create()
    mid = store.append(cid, Role.ASSISTANT, "", MessageState.PARTIAL)
    fine = [(i, f" guess {i}") for i in range(50)]
    store.checkpoint(mid, "text", state=MessageState.PARTIAL, rejected=fine)
    assert json.loads(store.db.execute("SELECT rejected FROM messages WHERE id=?", (mid,)).fetchone()[0]) == [
        [i, t] for i, t in fine
    ]
    store.checkpoint(
        mid, "text", state=MessageState.PARTIAL, rejected=[*fine, (50, "x\ud83d"), (51, "\ude00y")]
    )
    saved = json.loads(store.db.execute("SELECT rejected FROM messages WHERE id=?", (mid,)).fetchone()[0])
    assert saved[-2:] == [[50, "x\ufffd"], [51, "\ufffdy"]], "broken surrogates are replaced, not dropped"
    assert saved[:50] == [[i, t] for i, t in fine], "the readable refusals are kept as they were"


WRITER = """
import sys, time
from app.engine.store.conversations import ConversationStore
from app.engine.store.transcript import AnswerStats, MessageState, Role
s = ConversationStore(sys.argv[1])
cid = s.create("killed")
s.append(cid, Role.USER, "go")
mid = s.append(cid, Role.ASSISTANT, "", state=MessageState.PARTIAL)
text = ""
i = 0
while True:
    i += 1
    text += f"word{i} "
    s.checkpoint(mid, text, state=MessageState.PARTIAL, stats=AnswerStats(tokens=i))
    if i == 50:
        print("ready", flush=True)
    time.sleep(0.001)
"""


def test_sigkill_mid_checkpoint_leaves_a_readable_database(tmp_path):
    path = tmp_path / "k.sqlite3"
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
        )
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    s = ConversationStore(path)
    assert s.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    convs = s.list()
    assert len(convs) == 3
    for summary in convs:
        m = s.load(summary.id).messages[-1]
        n = m.stats.tokens
        assert n >= 50, "each answer streamed at least 50 tokens before the stop"
        assert m.content.split() == [f"word{i}" for i in range(1, n + 1)], (
            "the saved text is every streamed word, in order"
        )
