"""The context gate in the window: the Settings choice reaches the worker, and the strip says
when a draft's shorter context stopped drafting."""

from __future__ import annotations

from app.engine.decoding.events import Decision, Provenance, Reason, RoundEvent
from app.engine.protocol import ContextOverflow, Generate
from app.engine.store.transcript import AnswerStats
from app.ui.chat.settings_dialog import ChatSettings, SettingsDialog
from app.ui.chat.stats import LiveStats, StatusStrip, stats_line
from tests.ui.test_main_window import engine, type_and_send

STOPPED = (
    "drafting stopped at 2,048 tokens, the draft model's context; the rest of the answer is plain decoding"
)


def test_the_dialog_offers_refuse_by_default_and_drop_oldest(qtbot):
    dialog = SettingsDialog(ChatSettings())
    qtbot.addWidget(dialog)
    assert dialog.value().overflow == "refuse", "refuse is the default overflow setting"
    assert dialog.overflow.currentText() == "refuse", "the dialog shows refuse chosen"
    dialog.overflow.setCurrentIndex(dialog.overflow.findData("drop_oldest"))
    chosen = dialog.value()
    assert chosen.overflow == "drop_oldest"
    assert ChatSettings.from_dict(chosen.to_dict()).overflow == "drop_oldest"
    assert ChatSettings.from_dict({"overflow": "truncate"}).overflow == "refuse"  # a damaged row still opens


def test_the_choice_travels_with_the_generate_command(qtbot, window):
    window.controller.chat_settings = ChatSettings(max_tokens=5, overflow="drop_oldest")
    type_and_send(qtbot, window, "hello")
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)
    [ask] = [c for c in engine(window).commands if isinstance(c, Generate)]
    assert ask.overflow is ContextOverflow.DROP_OLDEST


def test_the_strip_and_the_answer_stats_say_that_drafting_stopped(qtbot):
    strip = StatusStrip()
    qtbot.addWidget(strip)
    stats = LiveStats(mode="fixed")
    stats.round(
        RoundEvent(0, 2, (1, 2), 2, (1, 2, 3), 0.001, 0.01, Provenance.DRAFT, Decision(Reason.FIXED, 2))
    )
    assert stats.snapshot().draft_stopped is None
    stats.round(
        RoundEvent(
            1, 0, (), 0, (4,), 0.0, 0.01, Provenance.MAIN, Decision(Reason.FIXED, 2, draft_stopped=STOPPED)
        )
    )
    snapshot = stats.snapshot()
    strip.show_stats(snapshot)
    assert STOPPED in strip.text(), "the strip says why the draft stopped"
    assert STOPPED in stats_line(snapshot), "the line under the answer says why too"
    assert AnswerStats.from_json(snapshot.to_json())[0].draft_stopped == STOPPED  # kept with the answer
