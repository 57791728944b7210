"""The strip's one line and the line under each answer: never a speedup the draft did not earn."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtWidgets import QApplication

from app.engine.store.transcript import AnswerStats
from app.ui.common.stats_words import answer_line, summary
from app.ui.window.glossary import GlossaryDialog

RAN = AnswerStats(
    tokens=100, tokens_per_second=112.4, proposed=80, accepted=41, mode="adaptive", draft="/m/d"
)


@pytest.mark.parametrize(
    ("stats", "line"),
    [
        (replace(RAN, mode="plain", proposed=0, accepted=0), "112 tok/s · no draft"),
        (replace(RAN, proposed=0, accepted=0, bypassed=True, draft=None), "112 tok/s · no draft"),
        (replace(RAN, proposed=0, accepted=0), "112 tok/s · the draft has not run yet"),
        (replace(RAN, bypassed=True), "112 tok/s · the draft isn't helping here — drafting paused"),
        (
            replace(RAN, bypassed=True, draft_rarely_right=(0, 300)),
            "112 tok/s · this draft was right on 0 of 300 guesses — drafting paused (try another draft)",
        ),
        (RAN, "112 tok/s · speedup not measured yet"),
        (
            replace(RAN, plain_tokens_per_second=62.0, speedup=1.81),
            "112 tok/s · 1.81× faster than without the draft",
        ),
        (
            replace(RAN, plain_tokens_per_second=110.0, speedup=1.02),
            "112 tok/s · 1.02× — about as fast as without the draft",
        ),
        (
            replace(RAN, plain_tokens_per_second=140.0, speedup=0.8),
            "112 tok/s · 0.80× — slower than without the draft (try another draft)",
        ),
        (
            replace(RAN, plain_tokens_per_second=62.0, plain_low=56.0, plain_high=68.0),
            "112 tok/s · about 1.81× (1.65–2.01×) faster than without the draft",
        ),
        (  # plain measured 1.81x away on average, but its spread reaches the answer's own speed
            replace(RAN, plain_tokens_per_second=62.0, plain_low=40.0, plain_high=120.0),
            "112 tok/s · about 1.81× (0.94–2.81×) — not surely faster or slower than without the draft yet",
        ),
        (
            replace(RAN, tokens=5, plain_tokens_per_second=62.0, speedup=1.81),
            "112 tok/s · too short to judge the speed",
        ),
    ],
)
def test_each_case_reads_as_one_plain_line(stats, line):
    assert summary(stats) == line


def test_a_plain_answer_never_claims_a_speedup_even_with_a_stored_ratio():
    old = replace(RAN, mode="plain", proposed=0, accepted=0, plain_tokens_per_second=100.0, speedup=1.12)
    assert "faster" not in summary(old), "a plain answer's summary never says 'faster'"
    assert "×" not in answer_line(old), "a plain answer's line shows no speedup"


def test_the_line_under_an_answer_gives_speed_speedup_and_the_drafts_share():
    measured = replace(RAN, plain_tokens_per_second=62.0, speedup=1.81)
    assert answer_line(measured) == "112 tok/s · 1.81× faster than without the draft · 41% from the draft"
    assert answer_line(RAN) == "112 tok/s · 41% from the draft"  # no baseline: no ratio
    short = replace(measured, tokens=5, accepted=3)
    assert answer_line(short) == "112 tok/s · too short to judge the speed · 60% from the draft"


def test_the_glossary_explains_the_terms_on_screen(qtbot):
    dialog = GlossaryDialog()
    qtbot.addWidget(dialog)
    text = dialog.text.toPlainText()
    for term in ("Draft length", "Acceptance", "Speedup", "Oracle", "Residual sampling", "Prompt lookup"):
        assert term in text
    assert QApplication.instance() is not None
