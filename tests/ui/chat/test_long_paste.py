"""A megabyte paste is sent without the window stalling (issue 29, class 1): Qt's word-boundary
wrapping is quadratic in a run with no spaces, so views holding one wrap anywhere, and the
transcript shows the start of a huge user message while the whole of it is sent and saved."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QByteArray, QMimeData, Qt
from PySide6.QtGui import QTextOption
from PySide6.QtWidgets import QApplication, QPlainTextEdit

from app.engine.protocol import Generate
from app.engine.store.transcript import Role
from app.ui.chat.chat_view import SHOWN_CHARS
from app.ui.chat.sidebar import SEARCH_CHARS
from app.ui.chat.text.long_text import BOX_PREVIEW_CHARS, MAX_CHARS, SHOWN_LINES, pasted_text, preview
from app.ui.chat.text.wrapping import LONG_RUN, has_long_run
from app.ui.main_window import MainWindow
from tests.ui.test_main_window import make_window as make_fake_window

ANYWHERE = QTextOption.WrapMode.WrapAnywhere
AT_WORDS = QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere


def make_window(qtbot, home, script=None) -> MainWindow:
    w = make_fake_window(qtbot, home, rate=2000.0, script=script)
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    w.controller.chat_settings = w.controller.chat_settings.__class__(max_tokens=10)
    return w


@pytest.mark.timeout(30)
def test_a_megabyte_line_without_spaces_is_pasted_and_sent(qtbot, specchat_home):
    """Over a minute of layout before; about a second now."""
    w = make_window(qtbot, specchat_home)
    paste = "x" * 1_000_000
    w.composer.editor.setPlainText(paste)
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    stored = w.store.load(w.controller.conversation).messages[0].content
    assert stored == paste  # sent and saved whole
    assert [c for c in w.bridge.engine.commands if isinstance(c, Generate)][-1].messages[-1][
        "content"
    ] == paste
    shown = w.view.toPlainText()
    assert "x" * SHOWN_CHARS in shown, "the chat shows the start of a huge message"
    assert "x" * (SHOWN_CHARS + 1) not in shown, "the chat shows no more than that start"
    assert f"{len(paste) - SHOWN_CHARS:,} more characters" in shown
    assert w.view.wordWrapMode() == ANYWHERE
    w.close()


def test_wrapping_follows_what_is_shown(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    editor = w.composer.editor
    assert editor.wordWrapMode() == AT_WORDS, "the message box wraps at words"
    assert w.view.wordWrapMode() == AT_WORDS, "the chat wraps at words"
    mime = QMimeData()
    mime.setText("y" * (LONG_RUN + 1))
    editor.insertFromMimeData(mime)  # a paste
    assert editor.wordWrapMode() == ANYWHERE
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    assert editor.wordWrapMode() == AT_WORDS  # the composer is empty again
    assert w.view.wordWrapMode() == ANYWHERE
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    w.controller.new_conversation()
    assert w.view.wordWrapMode() == AT_WORDS  # nothing long is shown any more
    editor.setPlainText("short words " * 1000)
    assert editor.wordWrapMode() == AT_WORDS
    w.close()


def test_an_answer_growing_a_long_run_switches_while_streaming(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home, script=["=" * 40])
    w.controller.chat_settings = w.controller.chat_settings.__class__(max_tokens=1_000_000)
    assert w.controller.send("draw a line")
    qtbot.waitUntil(lambda: w.view.wordWrapMode() == ANYWHERE, timeout=10_000)
    assert w.controller.busy  # switched on the live text, before the answer is rendered
    w.controller.stop()
    w.close()


def test_has_long_run():
    assert not has_long_run("a " * 10_000)
    assert not has_long_run("z" * LONG_RUN)
    assert has_long_run("words " + "z" * (LONG_RUN + 1) + " words")
    assert has_long_run("\n" + "é" * (LONG_RUN + 1))


@pytest.mark.timeout(20)
def test_a_pasted_search_is_cut_to_what_stays_linear(qtbot, specchat_home):
    """LIKE '%query%' over a long message costs its length times the query's: this 30 KB query
    (the line edit's own limit is 32 KB) over 2 MB took over a minute per keystroke."""
    w = make_window(qtbot, specchat_home)
    cid = w.store.create("long", "", {})
    w.store.append(cid, Role.USER, "a" * 2_000_000)
    w.sidebar.search.setText("a" * 30_000 + "b")  # a paste
    assert len(w.sidebar.search.text()) == SEARCH_CHARS
    assert w.sidebar.ids() == [cid]  # the first hundred characters still find it
    w.close()


# The window's thread may work this long on one event; Qt's own share, not the text.
EVENT_S = 0.5


def timed(action) -> float:
    """CPU seconds the window's thread spends on `action` and the layout and painting it causes:
    its own work, which other programs on a busy machine do not lengthen as they do wall time."""
    started = time.thread_time()
    action()
    QApplication.processEvents()
    return time.thread_time() - started


@pytest.fixture(autouse=True)
def empty_clipboard_after() -> Iterator[None]:
    """The clipboard owns the test's mime data; left there, Qt frees it after Python at exit."""
    yield
    QApplication.clipboard().clear()


def on_clipboard(text: str) -> None:
    """As a desktop clipboard hands a paste over: UTF-8 bytes."""
    mime = QMimeData()
    mime.setData("text/plain", QByteArray(text.encode()))
    QApplication.clipboard().setMimeData(mime)


def shown_in_box(w: MainWindow) -> str:
    return QPlainTextEdit.toPlainText(w.composer.editor)  # what the box lays out, not what it keeps


def sent_text(w: MainWindow) -> str:
    return [c for c in w.bridge.engine.commands if isinstance(c, Generate)][-1].messages[-1]["content"]


@pytest.mark.timeout(60)
def test_a_100_megabyte_paste_keeps_a_million_characters_says_so_and_sends_them(qtbot, specchat_home):
    """12 s of frozen window before: the whole paste was read, laid out and saved."""
    w = make_window(qtbot, specchat_home)
    text = "Otters hold hands while they sleep. " * (100_000_000 // 36)  # 100 MB
    on_clipboard(text)
    assert timed(w.composer.editor.paste) < EVENT_S
    kept = text[:MAX_CHARS]
    notice = w.composer.long_note.text()
    assert not w.composer.long_bar.isHidden(), "a long paste shows the notice bar"
    assert f"Only the first {MAX_CHARS:,} characters" in notice, (
        "the notice says only the first characters are kept"
    )
    assert w.composer.editor.toPlainText() == kept  # what is kept, to the character
    assert len(shown_in_box(w)) <= BOX_PREVIEW_CHARS + 2, "the box shows only a short preview"
    assert kept.startswith(shown_in_box(w)[:-2]), "the preview is the start of what is kept"
    assert timed(lambda: qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)) < EVENT_S
    assert w.store.load(w.controller.conversation).messages[0].content == kept, (
        "what is saved is what was kept"
    )
    assert sent_text(w) == kept, "what is sent is what was kept"
    shown = w.view.toPlainText()
    assert preview(kept) in shown, "the chat shows the start of the message"
    assert f"… and {MAX_CHARS - len(preview(kept)):,} more characters" in shown, (
        "the chat says how many more characters there are"
    )
    assert w.composer.editor.toPlainText() == "", "the box is empty after sending"
    assert w.composer.long_bar.isHidden(), "the notice bar goes away after sending"
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    w.close()


@pytest.mark.timeout(60)
def test_a_hundred_thousand_blank_lines_paste_and_send_at_once(qtbot, specchat_home):
    """1.2 to 2.7 s per paste before: a block per line, laid out in the box and then the chat."""
    w = make_window(qtbot, specchat_home)
    text = "Why?" + "\n" * 100_000 + "Because."
    QApplication.clipboard().setText(text)
    assert timed(w.composer.editor.paste) < EVENT_S
    assert f"A long text ({len(text):,} characters)" in w.composer.long_note.text()
    assert "all of it is sent" in w.composer.long_note.text()
    assert w.composer.editor.toPlainText() == text, "the box holds the whole paste"
    assert shown_in_box(w).count("\n") < 50, "the box shows only a few of its lines"
    assert timed(lambda: qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)) < EVENT_S
    assert w.store.load(w.controller.conversation).messages[0].content == text, "the whole paste is saved"
    assert sent_text(w) == text, "the whole paste is sent"
    shown = w.view.toPlainText()
    assert shown.count("\n") < SHOWN_LINES + 20  # the preview's lines and the turn around them
    assert f"{len(text) - len(preview(text)):,} more characters, sent in full" in shown
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    w.close()


def test_a_long_text_is_removed_whole_and_the_box_edits_again(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    editor = w.composer.editor
    editor.setPlainText("a few words")
    editor.moveCursor(editor.textCursor().MoveOperation.End)
    QApplication.clipboard().setText(" and a long paste" * 2000)
    editor.paste()
    assert editor.toPlainText() == "a few words" + " and a long paste" * 2000  # joined where pasted
    assert editor.isReadOnly(), "a long paste cannot be edited in the box"
    assert not w.composer.long_bar.isHidden(), "the notice bar is shown"
    w.composer.remove.click()
    assert editor.toPlainText() == "", "Remove empties the box"
    assert not editor.isReadOnly(), "the box can be edited again"
    assert w.composer.long_bar.isHidden(), "the notice bar goes away"
    editor.setPlainText("z" * 30_000)
    qtbot.keyClick(editor, Qt.Key.Key_Escape)  # Esc takes it out too
    assert editor.toPlainText() == "", "Esc empties the box"
    assert w.composer.long_bar.isHidden(), "the notice bar goes away"
    w.close()


def test_a_paste_is_read_to_the_cap_whatever_its_characters():
    mime = QMimeData()
    mime.setData("text/plain", QByteArray(("é🦦a" * (MAX_CHARS // 2)).encode()))
    kept = pasted_text(mime)
    assert kept.cut, "a paste over the cap is marked as cut"
    assert kept.text == ("é🦦a" * (MAX_CHARS // 2))[:MAX_CHARS], "it is cut to the cap in characters"
    assert "\ufffd" not in kept.text, "no character is broken by the cut"
    mime.setData("text/plain", QByteArray(b"just this"))
    assert pasted_text(mime).text == "just this", "a short paste is kept whole"
    assert not pasted_text(mime).cut, "a short paste is not marked as cut"


def test_a_preview_is_the_start_to_a_number_of_characters_and_lines():
    assert preview("abc\ndef\nghi", chars=100, lines=2) == "abc\ndef"
    assert preview("abcdef", chars=4, lines=2) == "abcd"
    assert preview("short", chars=100, lines=2) == "short"
