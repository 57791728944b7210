"""The chat's changes commit first and are shown only once committed, text cleaned on the way in."""

from __future__ import annotations

import sqlite3

import pytest

from app.engine.store.chat_log import ChatLog
from app.engine.store.conversations import ConversationStore
from app.engine.store.transcript import Transcript
from tests.engine.store.test_write_failures import DISK_FULL, FailingConnection


def pairs(log: ChatLog, cid: int) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    shown = [(t.key, t.text) for t in log.transcript]
    stored = [(m.id, m.content) for m in log.store.load(cid).messages]
    return shown, stored


def test_bad_text_is_shown_as_it_was_stored(store: ConversationStore):
    log = ChatLog(store)
    cid, turn = log.ask(None, "otters \udcff")
    assert turn.text == "otters \ufffd"
    log.edit(cid, turn.key, "seals \ud800")
    shown, stored = pairs(log, cid)
    assert shown == stored == [(turn.key, "seals \ufffd")]


def test_a_failed_edit_changes_neither_the_file_nor_the_transcript(store: ConversationStore):
    log = ChatLog(store)
    cid, question = log.ask(None, "first")
    answer = log.start_answer(cid)
    real = store.db
    store.db = FailingConnection(real, "DELETE FROM messages", sqlite3.OperationalError(DISK_FULL))
    with pytest.raises(sqlite3.OperationalError):
        log.edit(cid, question.key, "second")
    store.db = real
    shown, stored = pairs(log, cid)
    assert shown == stored == [(question.key, "first"), (answer.key, "")]


def test_regenerate_cuts_by_stored_position_not_by_place(store: ConversationStore):
    """Rows whose positions have gaps (a salvaged file) still lose only what follows the question."""
    log = ChatLog(store)
    cid, first = log.ask(None, "one")
    log.start_answer(cid)
    _, second = log.ask(cid, "two")
    old = log.start_answer(cid)
    store.db.execute("UPDATE messages SET position=position*10 WHERE conversation_id=?", (cid,))
    log = ChatLog(store, Transcript(store.load(cid).turns()))
    new = log.regenerate(cid, old.key)
    assert new is not None and new.live
    shown, stored = pairs(log, cid)
    assert [key for key, _ in shown] == [key for key, _ in stored]
    assert [text for _, text in stored] == ["one", "", "two", ""], (
        "the regenerated answer replaces the old one in place"
    )
    assert stored[0][0] == first.key, "the first question keeps its key"
    assert stored[2][0] == second.key


def test_an_answer_whose_save_failed_is_written_before_the_next_change(store: ConversationStore):
    log = ChatLog(store)
    cid, _ = log.ask(None, "first")
    answer = log.start_answer(cid)
    answer.answer.add_tail("Otters hold hands.")  # the text streamed so far
    real = store.db
    store.db = FailingConnection(real, "UPDATE messages", sqlite3.OperationalError(DISK_FULL))
    with pytest.raises(sqlite3.OperationalError):
        log.save_answer(answer)
    assert log.owed is answer, "the answer on screen is owed to the file"
    with pytest.raises(sqlite3.OperationalError):
        log.ask(cid, "second")  # still failing: the question is not stored either
    assert log.owed is answer, "a failed catch-up keeps the answer owed"
    assert [m.content for m in store.load(cid).messages] == ["first", ""], "nothing after it was stored"
    store.db = real
    log.ask(cid, "second")
    assert log.owed is None, "once written, nothing is owed"
    shown, stored = pairs(log, cid)
    assert shown == stored, "the screen and the file agree again"
    assert [text for _, text in stored] == ["first", "Otters hold hands.", "second"]


def test_a_title_is_whole_words_and_follows_an_edit_of_the_first_question(store: ConversationStore):
    log = ChatLog(store)
    long = "Write a Python function that reverses a linked list in place and explain it"
    cid, question = log.ask(None, long)
    assert store.title(cid) == "Write a Python function that reverses a linked…", "cut between words"
    log.edit(cid, question.key, "Write a haiku about the sea")
    assert store.title(cid) == "Write a haiku about the sea", "an edit of the first question retitles"
    store.rename(cid, "Poems")
    log.edit(cid, question.key, "Write a limerick")
    assert store.title(cid) == "Poems", "a title the user chose is kept"
