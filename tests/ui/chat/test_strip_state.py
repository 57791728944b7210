"""The strip's first word on a finished answer says how it ended, never "Done" for one cut short."""

from __future__ import annotations

from app.ui.chat.settings_dialog import ChatSettings
from tests.ui.test_main_window import make_window

MAIN, DRAFT = "/models/main", "/models/draft"


def test_an_answer_cut_at_max_tokens_does_not_say_done(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    w.load_pair(MAIN, DRAFT)
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    w.controller.chat_settings = ChatSettings(max_tokens=10)
    assert w.controller.send("Tell a long story")
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    assert w.controller.transcript.last_answer().stats.finish_reason == "length"
    assert w.strip.labels["state"].text() == "Cut at max tokens", "the strip says why it ended"
    w.close()
