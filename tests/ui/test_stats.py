"""The status strip under the chat: what it says about a generation's speculation."""

from __future__ import annotations

from app.engine.decoding.events import Provenance, RoundEvent
from app.ui.stats import LiveStats, StatusStrip


def _round(index: int, k: int, policy: dict) -> RoundEvent:
    return RoundEvent(
        index,
        k,
        (1,) * k,
        k,
        (1,) * (k + 1),
        0.001 * k,
        0.01,
        Provenance.DRAFT if k else Provenance.MAIN,
        policy,
    )


def test_the_strip_says_why_speculation_is_paused_and_when_the_draft_is_the_cause(qtbot):
    strip = StatusStrip()
    qtbot.addWidget(strip)
    stats = LiveStats(mode="adaptive")

    stats.round(
        _round(
            0,
            0,
            {
                "policy": "adaptive",
                "k": 0,
                "bypassed": True,
                "draft_right": (40, 60),
                "draft_rarely_right": False,
            },
        )
    )
    strip.show_stats(stats.snapshot())
    assert "speculation paused: not paying" in strip.text()

    stats.round(
        _round(
            1,
            0,
            {
                "policy": "adaptive",
                "k": 0,
                "bypassed": True,
                "draft_right": (0, 300),
                "draft_rarely_right": True,
            },
        )
    )
    strip.show_stats(stats.snapshot())
    assert "speculation paused: draft right on 0/300; try another draft" in strip.text()
    assert "0 of the 300 proposals" in strip.labels["paused"].toolTip() and "not paying" not in strip.text()

    stats.round(
        _round(
            2,
            3,
            {
                "policy": "adaptive",
                "k": 3,
                "bypassed": False,
                "draft_right": (3, 303),
                "draft_rarely_right": True,
            },
        )
    )
    strip.show_stats(stats.snapshot())
    assert "paused" not in strip.text() and "draft length 3" in strip.text()
    assert strip.labels["paused"].toolTip() == ""


def test_fixed_k_never_reports_a_pause(qtbot):
    strip = StatusStrip()
    qtbot.addWidget(strip)
    stats = LiveStats(mode="fixed")
    stats.round(_round(0, 0, {"policy": "fixed", "k": 4}))
    strip.show_stats(stats.snapshot())
    assert "paused" not in strip.text()
