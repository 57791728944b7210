"""What the chat shows is what the database holds: send, edit and regenerate each meet a failed
write once, and after every step the transcript the view draws equals a fresh read of the file."""

from __future__ import annotations

import sqlite3

from PySide6.QtCore import Qt

from app.engine.protocol import Generate
from tests.ui.chat.test_unsent_text import shown_failure
from tests.ui.test_main_window import engine, type_and_send

LOCKED = "database is locked"


class FailOnce:
    """The store's connection, whose first statement starting with `fails_on` raises."""

    def __init__(self, db: sqlite3.Connection, fails_on: str) -> None:
        self.real, self.fails_on, self.failed = db, fails_on, False

    @property
    def in_transaction(self) -> bool:
        return self.real.in_transaction

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if not self.failed and sql.startswith(self.fails_on):
            self.failed = True
            raise sqlite3.OperationalError(LOCKED)
        return self.real.execute(sql, *args)


def fail_once(window, fails_on: str) -> FailOnce:
    db = window.store.db
    failing = FailOnce(db.real if isinstance(db, FailOnce) else db, fails_on)
    window.store.db = failing
    return failing


def said(window, failures: list[str]) -> str:
    """The failure just reported, which the window keeps on screen."""
    assert failures, "a failed save was not reported"
    text = failures.pop()
    assert not failures, "the failure was the only one reported"
    assert text in shown_failure(window), "the window shows the failure"
    return text


def shown(window) -> list[tuple[int, str, str, str]]:
    return [(t.key, t.role.value, t.text, t.state.value) for t in window.controller.transcript]


def stored(window) -> list[tuple[int, str, str, str]]:
    """The conversation read afresh from the file, through a connection of its own."""
    cid = window.controller.conversation
    if cid is None:
        return []
    db = sqlite3.connect(window.store.path)
    try:
        rows = db.execute(
            "SELECT id, role, content, state FROM messages WHERE conversation_id=? ORDER BY position", (cid,)
        ).fetchall()
    finally:
        db.close()
    return [(int(i), str(r), str(c), str(s)) for i, r, c, s in rows]


def settle(qtbot, window) -> None:
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)
    assert shown(window) == stored(window), "the chat shows something other than the database holds"


def generates(window) -> list[Generate]:
    return [c for c in engine(window).commands if isinstance(c, Generate)]


def test_the_chat_shows_what_the_database_holds_through_failed_writes(qtbot, window):
    window.controller.chat_settings = window.controller.chat_settings.__class__(max_tokens=8)
    composer = window.composer.editor
    failures: list[str] = []
    window.controller.failed.connect(failures.append)

    failing = fail_once(window, "INSERT INTO messages")  # send: the question cannot be saved
    type_and_send(qtbot, window, "Why is the sky blue?")
    assert failing.failed, "the failed save was tried"
    assert LOCKED in said(window, failures), "the user is told the file is locked"
    assert composer.toPlainText() == "Why is the sky blue?", "the question typed was lost"
    settle(qtbot, window)
    assert shown(window) == [], "a question that was not saved is shown"
    qtbot.keyClick(composer, Qt.Key.Key_Return)  # the same text, sent again
    assert composer.toPlainText() == ""
    settle(qtbot, window)
    question, answer = shown(window)
    assert question[1:3] == ("user", "Why is the sky blue?"), "the question sent again is shown"
    assert answer[3] == "complete", "its answer is complete"

    window.view.action.emit("edit", question[0])
    assert composer.toPlainText() == "Why is the sky blue?"
    composer.setPlainText("Why is the sea blue?")
    failing = fail_once(window, "DELETE FROM messages")  # edit: the text is written, the cut fails
    qtbot.keyClick(composer, Qt.Key.Key_Return)
    assert failing.failed, "the failed cut was tried"
    assert LOCKED in said(window, failures), "the user is told the file is locked"
    assert composer.toPlainText() == "Why is the sea blue?", "the edited text was lost"
    settle(qtbot, window)
    assert shown(window) == [question, answer], "a failed edit changed what is shown"
    qtbot.keyClick(composer, Qt.Key.Key_Return)
    settle(qtbot, window)
    question, answer = shown(window)
    assert question[2] == "Why is the sea blue?", "the edited question is shown"
    assert answer[3] == "complete", "its new answer is complete"
    assert [m["content"] for m in generates(window)[-1].messages] == ["Why is the sea blue?"]

    for fails_on in ("DELETE FROM messages", "INSERT INTO messages"):  # regenerate: either write fails
        asked = len(generates(window))
        failing = fail_once(window, fails_on)
        window.view.action.emit("regenerate", answer[0])
        assert failing.failed, "the failed write was tried"
        assert LOCKED in said(window, failures), "the user is told the file is locked"
        assert len(generates(window)) == asked, "an answer started that is not saved"
        settle(qtbot, window)
        assert shown(window) == [question, answer], f"a failed regenerate ({fails_on}) changed what is shown"

    window.view.action.emit("regenerate", answer[0])
    settle(qtbot, window)
    again = shown(window)
    assert again[0] == question, "the question stays"
    assert len(again) == 2, "one answer follows it"
    assert again[1][3] == "complete", "the regenerated answer is complete"
    assert len(generates(window)) == 3, "three answers were asked of the engine in all"
    assert not failures, "no failure is left unreported"


def test_an_answer_that_cannot_be_saved_stays_on_screen_and_is_saved_with_the_next_message(qtbot, window):
    window.controller.chat_settings = window.controller.chat_settings.__class__(max_tokens=8)
    failures: list[str] = []
    window.controller.failed.connect(failures.append)
    failing = fail_once(window, "UPDATE messages SET content")  # the answer's save fails once
    type_and_send(qtbot, window, "Why is the sky blue?")
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)  # the chat is not left waiting
    assert failing.failed, "the answer's save was tried"
    text = said(window, failures)
    assert LOCKED in text, "the user is told why the answer was not saved"
    assert "stays on screen" in text, "the user is told the answer is not lost"
    question, answer = shown(window)
    assert answer[3] == "complete", "the answer is shown whole"
    assert stored(window)[-1][2] != answer[2] or stored(window)[-1][3] != "complete", (
        "the failed save left the database behind the screen (else the test injected nothing)"
    )

    type_and_send(qtbot, window, "And the sea?")
    settle(qtbot, window)  # the earlier answer was saved before the new question
    assert shown(window)[1] == answer, "the earlier answer is unchanged"
    assert len(shown(window)) == 4, "the new question and its answer follow"
    assert not failures, "nothing else failed"


def test_an_answer_whose_speed_cannot_be_kept_is_still_shown_and_saved(qtbot, window):
    window.controller.chat_settings = window.controller.chat_settings.__class__(max_tokens=40)
    notices: list[str] = []
    failures: list[str] = []
    window.controller.notice.connect(notices.append)
    window.controller.failed.connect(failures.append)
    failing = fail_once(window, "INSERT INTO runs")  # the speed history's write fails
    type_and_send(qtbot, window, "Why is the sky blue?")
    settle(qtbot, window)
    assert failing.failed, "the answer's speed was to be kept"
    assert any(LOCKED in n for n in notices), f"the user is told the speed was not kept: {notices}"
    assert shown(window)[-1][3] == "complete", "the answer is complete"
    assert not failures, "the answer itself was saved"


def test_settings_that_cannot_be_saved_are_said_and_still_apply(qtbot, window):
    type_and_send(qtbot, window, "Why is the sky blue?")
    settle(qtbot, window)
    failures: list[str] = []
    window.controller.failed.connect(failures.append)
    failing = fail_once(window, "UPDATE conversations SET system_prompt")
    wanted = window.controller.chat_settings.__class__(system_prompt="Answer like a pirate.", max_tokens=8)
    window.controller.save_settings(wanted)
    assert failing.failed, "the settings' save was tried"
    text = said(window, failures)
    assert LOCKED in text, "the user is told why the settings were not saved"
    assert window.controller.chat_settings.system_prompt == "Answer like a pirate.", "they still apply"
    cid = window.controller.conversation
    assert window.store.load(cid).system_prompt == "", "half of the settings was not stored either"
