"""The real window, offscreen, with the synthetic engine: send, stream, stop, regenerate, edit, switch."""

from __future__ import annotations

from PySide6.QtCore import QSettings, Qt, QUrl

from app.devtools.fake_engine import ExactClock, FakeEngine
from app.engine.library.discovery import Sources
from app.engine.protocol import Generate, LoadPair
from app.engine.store.conversations import ConversationStore
from app.engine.store.transcript import Role
from app.ui.main_window import MainWindow
from tests.engine.store.schema_v3 import write_v3_database


def make_window(qtbot, home, rate=300.0, models=None, script=None, engine_factory=None) -> MainWindow:
    models = models or home / "models"
    models.mkdir(parents=True, exist_ok=True)
    window = MainWindow(
        engine_factory=engine_factory
        or (lambda emit: FakeEngine(emit, rate=rate, script=script, clock=ExactClock())),
        store=ConversationStore(home / "c.sqlite3"),
        settings=QSettings(str(home / "settings.ini"), QSettings.Format.IniFormat),
        sources=Sources(hub_cache=None, lmstudio=None, specchat=models, use_hub=False),
        restore_pair=False,
    )
    qtbot.addWidget(window)
    window.resize(1000, 700)
    window.show()
    return window


def engine(w: MainWindow) -> FakeEngine:
    return w.bridge.engine  # type: ignore[return-value]


def type_and_send(qtbot, w: MainWindow, text: str) -> None:
    w.composer.editor.setPlainText(text)
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)


def test_send_streams_highlighted_tokens_and_saves(qtbot, window):
    window.controller.chat_settings = window.controller.chat_settings.__class__(max_tokens=60)
    window.composer.editor.setPlainText("line one")
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert "\n" in window.composer.editor.toPlainText()  # Shift+Enter is a new line, not a send
    window.composer.editor.clear()
    type_and_send(qtbot, window, "Explain speculation")
    assert window.composer.button.text() == "Stop"
    stored = window.store.load(window.controller.conversation)
    assert stored.messages[0].content == "Explain speculation"  # committed before generation
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)
    stored = window.store.load(window.controller.conversation)
    answer = stored.messages[1]
    assert answer.state == "complete", "the answer is complete"
    assert answer.stats.tokens == 60, "the answer has all 60 tokens"
    assert answer.tokens.count(";") == 59, "each token is saved"
    assert answer.stats.proposed > 0, "the draft proposed tokens"
    assert 0 < answer.stats.acceptance < 1, "some, not all, of the draft's tokens were accepted"
    assert "tok/s" in window.strip.text(), "the strip gives the speed"
    assert "acceptance" in window.strip.labels["summary"].toolTip(), (
        "the strip's tooltip gives the acceptance"
    )
    assert "vs plain" not in window.strip.text()  # no plain speed measured: no speedup claimed
    assert "% from the draft" in window.view.toPlainText()  # the line under the answer
    draft_chars = [window.view.info_at(i) for i in range(window.view.document().characterCount() - 1)]
    assert {"draft", "lookup", "main"} <= {i.get("provenance") for i in draft_chars if i}
    assert window.sidebar.model.rowCount() == 1, "the sidebar lists the conversation"
    assert "Explain" in window.sidebar.model.item(0).text(), "the conversation is named after the question"


def test_stop_saves_partial_and_esc_stops(qtbot, window):
    window.controller.chat_settings = window.controller.chat_settings.__class__(max_tokens=100_000)
    type_and_send(qtbot, window, "Tell a long story")
    qtbot.waitUntil(
        lambda: window.controller.live and window.controller.live.stats.tokens > 40, timeout=10_000
    )
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)
    assert not window.controller.busy, "Esc stops the answer"
    assert window.composer.button.text() == "Send", "the button says Send again"
    answer = window.store.load(window.controller.conversation).messages[1]
    assert answer.state == "cancelled", "the stopped answer is saved as cancelled"
    assert len(answer.content) > 0, "the words written before Stop are kept"
    assert "stopped" in window.view.toPlainText()


def test_regenerate_and_edit_resend(qtbot, window):
    window.controller.chat_settings = window.controller.chat_settings.__class__(max_tokens=20)
    type_and_send(qtbot, window, "first question")
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)
    cid = window.controller.conversation
    first_answer = window.store.load(cid).messages[1].id
    window.view.anchorClicked.emit(QUrl(f"specchat:regenerate/{first_answer}"))
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)
    msgs = window.store.load(cid).messages
    assert len(msgs) == 2, "regenerating keeps one answer"
    assert msgs[1].state == "complete", "the new answer is complete"
    assert len([c for c in engine(window).commands if isinstance(c, Generate)]) == 2
    user_key = msgs[0].id
    window.view.anchorClicked.emit(QUrl(f"specchat:edit/{user_key}"))
    assert window.composer.editor.toPlainText() == "first question", "edit puts the question back in the box"
    assert window.composer.note.isVisible(), "the box says it edits a question"
    window.composer.editor.setPlainText("edited question")
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)
    msgs = window.store.load(cid).messages
    assert [m.content for m in msgs][0] == "edited question", "the edited question replaces the first"
    assert len(msgs) == 2, "it gets one new answer"
    last = [c for c in engine(window).commands if isinstance(c, Generate)][-1]
    assert [m["content"] for m in last.messages] == ["edited question"]


def test_switch_pair_mid_stream_cancels_cleanly(qtbot, window):
    window.controller.chat_settings = window.controller.chat_settings.__class__(max_tokens=100_000)
    type_and_send(qtbot, window, "go on")
    qtbot.waitUntil(
        lambda: window.controller.live and window.controller.live.stats.tokens > 20, timeout=10_000
    )
    window.load_pair("/models/other", None, "plain")
    assert not window.controller.busy
    qtbot.waitUntil(lambda: window.controller.pair == ("/models/other", None), timeout=10_000)
    assert isinstance(engine(window).commands[-1], LoadPair)
    answer = window.store.load(window.controller.conversation).messages[1]
    assert answer.state == "cancelled", "a load mid-answer saves it as cancelled"
    assert answer.content, "the words written before the load are kept"
    window.controller.chat_settings = window.controller.chat_settings.__class__(max_tokens=10)
    type_and_send(qtbot, window, "again")
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)
    assert [c for c in engine(window).commands if isinstance(c, Generate)][-1].speculation.mode == "off"
    assert "no draft" in window.pair_label.text()


def test_sidebar_lists_switches_searches_and_survives_a_damaged_conversation(qtbot, window):
    s = window.store
    a = s.create("alpha chat")
    s.append(a, Role.USER, "about otters")
    b = s.create("beta chat")
    mid = s.append(b, Role.ASSISTANT, "beta text")
    s.db.execute("UPDATE messages SET stats='{{' , tokens='garbage' WHERE id=?", (mid,))
    window.refresh_sidebar()
    assert window.sidebar.model.rowCount() == 2
    window.sidebar.selected.emit(b)
    assert "beta text" in window.view.toPlainText()
    window.sidebar.selected.emit(a)
    assert "about otters" in window.view.toPlainText()
    window.sidebar.search.setText("otter")
    assert window.sidebar.ids() == [a]
    window.sidebar.rename_requested.emit(a, "renamed")
    window.sidebar.delete_requested.emit(b)
    window.sidebar.search.setText("")
    assert [window.sidebar.model.item(i).text() for i in range(window.sidebar.model.rowCount())] == [
        "renamed"
    ]


def test_a_conversation_from_the_previous_schema_shows_its_stats_and_verdict(qtbot, specchat_home):
    specchat_home.mkdir(parents=True, exist_ok=True)
    write_v3_database(specchat_home / "c.sqlite3")
    w = make_window(qtbot, specchat_home)
    assert w.sidebar.ids() == [1]
    w.sidebar.selected.emit(1)
    text = w.view.toPlainText()
    assert "Otters hold hands." in text, "an old conversation shows its answer"
    assert "✓ Losslessness: Identical to plain greedy decoding" in text, (
        "an old conversation shows its verdict"
    )
    assert w.controller.transcript.last_answer().stats.speedup == 2.013
    info = w.view.info_at(text.index("hold") + 1)
    assert info["provenance"] == "draft"
    tip = w.view.tooltip_for(info)
    assert "41.3 tok/s" in tip, "the tooltip gives the old speed"
    assert "first token 83 ms" in tip, "the tooltip gives the old first-token time"
    assert "vs plain" not in tip, "a 4-token answer is too short to claim the speedup it once did"
    w.close()


def test_welcome_panel_on_first_run(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    qtbot.waitUntil(lambda: w.stack.currentWidget() is w.welcome, timeout=10_000)
    assert len(w.welcome.buttons) >= 1, "the welcome offers pairs"
    assert "Download" in w.welcome.buttons[0].text(), "the welcome's buttons download"
    w.close()


def test_closing_hides_the_window_before_waiting_for_the_worker(qtbot, window, monkeypatch):
    seen = []
    shutdown = window.bridge.shutdown

    def slow_shutdown(wait: float) -> None:  # stands in for a worker that takes a while to stop
        seen.append(window.isVisible())
        shutdown(wait)

    monkeypatch.setattr(window.bridge, "shutdown", slow_shutdown)
    assert window.isVisible()
    window.close()
    assert seen == [False]


def test_closing_drops_background_work_so_nothing_reports_to_a_closed_window(qtbot, window):
    import threading

    release, reported = threading.Event(), []
    job = window.background.start(lambda job: release.wait(5), reported.append)
    window.close()
    release.set()
    qtbot.waitUntil(lambda: job.task is not None and job.task.done(), timeout=5000)
    assert job.cancelled.is_set(), "closing cancels background work"
    assert reported == [], "nothing reports to a closed window"
    assert not window.background.jobs, "the window forgets its background work"
