"""A megabyte paste is sent without the window stalling (issue 29, class 1): Qt's word-boundary
wrapping is quadratic in a run with no spaces, so views holding one wrap anywhere, and the
transcript shows the start of a huge user message while the whole of it is sent and saved."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QMimeData, Qt
from PySide6.QtGui import QTextOption

from app.engine.protocol import Generate
from app.engine.store.transcript import Role
from app.ui.chat_view import SHOWN_CHARS
from app.ui.main_window import MainWindow
from app.ui.sidebar import SEARCH_CHARS
from app.ui.wrapping import LONG_RUN, has_long_run
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
    assert "x" * SHOWN_CHARS in shown and "x" * (SHOWN_CHARS + 1) not in shown
    assert f"{len(paste) - SHOWN_CHARS:,} more characters" in shown
    assert w.view.wordWrapMode() == ANYWHERE
    w.close()


def test_wrapping_follows_what_is_shown(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    editor = w.composer.editor
    assert editor.wordWrapMode() == AT_WORDS and w.view.wordWrapMode() == AT_WORDS
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
