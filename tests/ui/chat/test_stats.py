"""The status strip under the chat: what it says about a generation's speculation."""

from __future__ import annotations

from dataclasses import replace

from app.engine.decoding.events import Decision, Provenance, Reason, RoundEvent
from app.engine.store.transcript import AnswerStats
from app.ui.chat.stats import LiveStats, StatusStrip

DRAFT = "/models/draft"  # a draft model is loaded: a pause is the draft's, not "no draft"


def _round(index: int, k: int, decision: Decision) -> RoundEvent:
    return RoundEvent(
        index,
        k,
        (1,) * k,
        k,
        (1,) * (k + 1),
        0.001 * k,
        0.01,
        Provenance.DRAFT if k else Provenance.MAIN,
        decision,
    )


def test_the_strip_says_why_speculation_is_paused_and_when_the_draft_is_the_cause(qtbot):
    strip = StatusStrip()
    qtbot.addWidget(strip)
    stats = LiveStats(mode="adaptive")

    stats.round(
        _round(
            0,
            0,
            Decision(Reason.BYPASS, 0),
        )
    )
    strip.show_stats(replace(stats.snapshot(), draft=DRAFT))
    assert "the draft isn't helping here — drafting paused" in strip.text()

    stats.round(
        _round(
            1,
            0,
            Decision(Reason.BYPASS, 0, draft_right=(0, 300)),
        )
    )
    strip.show_stats(replace(stats.snapshot(), draft=DRAFT))
    assert "right on 0 of 300 guesses — drafting paused (try another draft)" in strip.text()
    assert "0 of the 300 proposals" in strip.labels["summary"].toolTip(), (
        "the tooltip says none of the proposals were right"
    )
    assert "isn't helping" not in strip.text(), "the strip does not repeat it"

    stats.round(
        _round(
            2,
            3,
            Decision(Reason.BEST, 3, draft_right=(3, 303)),
        )
    )
    strip.show_stats(replace(stats.snapshot(), draft=DRAFT))
    assert "paused" not in strip.text(), "a draft that helps again is not shown as paused"
    assert "Draft length now: 3" in strip.labels["summary"].toolTip(), (
        "the tooltip gives the new draft length"
    )
    assert "proposals" not in strip.labels["summary"].toolTip()


def test_fixed_k_never_reports_a_pause(qtbot):
    strip = StatusStrip()
    qtbot.addWidget(strip)
    stats = LiveStats(mode="fixed")
    stats.round(_round(0, 0, Decision(Reason.FIXED, 4)))
    strip.show_stats(replace(stats.snapshot(), draft=DRAFT))
    assert "paused" not in strip.text()


def test_plain_rounds_inside_an_answer_are_no_baseline_for_a_speedup(qtbot):
    strip = StatusStrip()
    qtbot.addWidget(strip)
    stats = LiveStats(mode="adaptive")
    stats.round(_round(0, 0, Decision(Reason.BEST, 0)))  # plain rounds only: the draft never ran
    stats.round(_round(1, 0, Decision(Reason.BEST, 0)))
    stats.tokens, stats.first_time, stats.last_time = 50, 0.0, 1.0
    snapshot = stats.snapshot()
    assert snapshot.speedup is None
    strip.show_stats(snapshot)
    assert "faster" not in strip.text(), "plain rounds alone show no 'faster'"
    assert "vs plain" not in strip.text(), "plain rounds alone show no 'vs plain'"


def test_the_legend_names_the_colours(qtbot, window):
    legend = window.strip.legend
    assert legend.isVisible()
    assert "from the draft" in legend.text(), "the legend names the draft's colour"
    assert "from your prompt" in legend.text(), "the legend names the prompt's colour"
    assert "refused guess (hover off)" in legend.text(), "while they are not shown, the legend says so"
    assert "View ▸ Show refused drafts on hover" in legend.toolTip(), "and where to turn them on"
    window.toggles.rejected.trigger()
    assert "refused guess (on hover)" in legend.text(), "once they are, it promises them on hover"
    window.toggles.rejected.trigger()


def test_the_glossary_opens_from_the_help_menu(qtbot, window):
    from app.ui.window.glossary import GlossaryDialog

    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    next(a for a in help_menu.actions() if a.text() == "Glossary…").trigger()
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(GlossaryDialog)))


def test_an_answers_live_stats_read_back_as_they_were_stored():
    stats = LiveStats(mode="adaptive")
    stats.round(_round(0, 3, Decision(Reason.BEST, 3)))
    stats.round(_round(1, 2, Decision(Reason.BEST, 2)))
    snapshot = stats.snapshot()
    assert AnswerStats.from_json(snapshot.to_json()) == (snapshot, False), (
        "the stored stats read back the same"
    )
