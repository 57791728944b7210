"""The window with the real engine worker and the toy pair: send, stop, switch pair mid-stream."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import Qt

from app.ui.chat.settings_dialog import ChatSettings
from tests.ui.conftest import open_window


@pytest.fixture
def window(qtbot, specchat_home, toy_models):
    w = open_window(qtbot, specchat_home, specchat_home, str(toy_models.main), str(toy_models.draft))
    yield w
    w.close()


def test_toy_pair_send_stop_and_switch(qtbot, window, toy_models):
    window.controller.chat_settings = ChatSettings(max_tokens=40, speculation="fixed", k=3)
    window.composer.editor.setPlainText("Write a haiku")
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=60_000)
    answer = window.store.load(window.controller.conversation).messages[1]
    assert answer.state == "complete", "the answer is complete"
    assert answer.stats.tokens > 0, "the answer has tokens"
    assert answer.stats.proposed > 0, "the draft proposed tokens"
    assert len(answer.tokens.split(";")) == answer.stats.tokens
    assert "tok/s" in window.strip.text()

    window.controller.chat_settings = ChatSettings(max_tokens=5000)
    window.composer.editor.setPlainText("Tell a long story")
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(
        lambda: window.controller.live and window.controller.live.stats.tokens > 5, timeout=60_000
    )
    window.composer.button.click()  # Stop
    assert not window.controller.busy
    assert window.store.load(window.controller.conversation).messages[3].state == "cancelled"

    window.composer.editor.setPlainText("And another")
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(
        lambda: window.controller.live and window.controller.live.stats.tokens > 5, timeout=60_000
    )
    window.load_pair(str(toy_models.main), None, "plain")  # switch mid-stream
    qtbot.waitUntil(lambda: window.controller.pair == (str(toy_models.main), None), timeout=60_000)
    window.controller.chat_settings = ChatSettings(max_tokens=12)
    window.composer.editor.setPlainText("Once more")
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=60_000)
    msgs = window.store.load(window.controller.conversation).messages
    assert [m.state for m in msgs[1::2]] == ["complete", "cancelled", "cancelled", "complete"]
    assert msgs[-1].stats.mode == "off", "the last answer ran plain"
    assert msgs[-1].stats.proposed == 0, "a plain answer proposes nothing"


def test_loading_on_a_gpu_shows_the_pass_shapes_compiling_then_answers(
    qtbot, specchat_home, toy_models, monkeypatch
):
    """Where the device builds kernels per shape, loading a pair goes on through a warm-up the
    status strip counts out; the window is then ready and answers as usual."""
    monkeypatch.setattr("app.engine.worker.compiles_per_shape", lambda: True)
    from app.ui.chat.stats import StatusStrip

    states: list[str] = []
    real = StatusStrip.set_state
    monkeypatch.setattr(
        StatusStrip, "set_state", lambda self, text: (states.append(text), real(self, text))[1]
    )
    w = open_window(qtbot, specchat_home, specchat_home, str(toy_models.main), str(toy_models.draft))
    try:
        qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=60_000)
        compiling = [s for s in states if "compiling pass shapes" in s]
        done, total = re.fullmatch(
            r"Preparing speculation: compiling pass shapes (\d+)/(\d+)…", compiling[-1]
        ).groups()
        assert done == total and int(total) >= 8, states  # every draft length, then every pass size
        assert states.index(compiling[0]) > states.index("Loading models…"), "compiling comes after loading"
        assert states[-1] == "Ready", "the strip ends on Ready"
        w.controller.chat_settings = ChatSettings(max_tokens=12)
        w.composer.editor.setPlainText("Write a haiku")
        qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: not w.controller.busy, timeout=60_000)
        assert w.store.load(w.controller.conversation).messages[1].state == "complete"
    finally:
        w.close()
