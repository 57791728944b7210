"""The dashboard with the toy pair through the real engine worker: the plain baseline is measured
on the worker after an answer, becomes the rate chart's reference, fills the history, and a new
message cancels a running measurement."""

from __future__ import annotations

import pytest

from app.engine.features.baselines import context_bucket
from app.engine.features.figures import speed_text
from app.ui.chat.settings_dialog import ChatSettings
from tests.ui.conftest import open_window


@pytest.fixture
def window(qtbot, specchat_home, toy_models):
    w = open_window(qtbot, specchat_home, specchat_home, str(toy_models.main), str(toy_models.draft))
    w.toggles.dashboard.trigger()
    yield w
    w.close()


def test_toy_pair_baseline_reference_history_and_cancel(qtbot, window, toy_models):
    w, main = window, str(toy_models.main)
    w.controller.chat_settings = ChatSettings(max_tokens=24, speculation="fixed", k=3)
    assert w.controller.send("Write a haiku about the sea")
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=60_000)
    context = w.dashboard.baseline.context_tokens
    assert context == w.store.load(w.controller.conversation).messages[-1].stats.prompt_tokens
    assert w.dashboard.rate.reference is None
    qtbot.waitUntil(lambda: "Measuring plain speed" in w.dashboard.baseline_note.text(), timeout=10_000)
    qtbot.waitUntil(lambda: "measured on this machine" in w.dashboard.baseline_note.text(), timeout=60_000)
    baseline = w.controller.baselines.get(main, context)
    assert baseline, "the plain speed is measured"
    assert baseline > 0, "the plain speed is a real speed"
    assert w.dashboard.rate.reference == baseline
    assert f"plain {speed_text(baseline)}" in w.dashboard.summary.text()
    [run] = w.controller.history.runs()
    assert (run.main, run.draft, run.kind, run.mode) == (main, str(toy_models.draft), "creative", "fixed")
    assert run.bucket == context_bucket(context), "the run is filed under its context's bucket"
    assert run.speedup == pytest.approx(run.tok_s / baseline), (
        "its speedup is against the measured plain speed"
    )
    assert [(r.kind, r.answers) for r in w.dashboard.history.rows] == [("creative", 1)]

    w.controller.chat_settings = ChatSettings(
        max_tokens=16, speculation="fixed", k=3, temperature=0.7, seed=1
    )
    assert w.controller.send("Another one")  # the same bucket: its baseline is the reference at once
    qtbot.waitUntil(
        lambda: w.dashboard.baseline is not None and w.dashboard.baseline.request == w.dashboard.request,
        timeout=30_000,
    )
    assert w.dashboard.rate.reference == baseline
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=60_000)
    assert not w.controller.plain.measuring, "no plain measurement is running"
    assert w.controller.plain.target is None, "no plain measurement is scheduled"
    rows = {(r.kind, r.temperature): r.answers for r in w.dashboard.history.rows}
    assert rows == {("creative", 0.0): 1, ("prose", 0.7): 1}

    w.controller.plain.tokens = 1_000_000  # a measurement that would not end by itself
    w.controller.chat_settings = ChatSettings(max_tokens=12, speculation="fixed", k=3)
    assert w.controller.send("Summarize: " + "the harbour reopened after the storm. " * 60)  # a new bucket
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=60_000)
    assert context_bucket(w.dashboard.baseline.context_tokens) > context_bucket(context)
    qtbot.waitUntil(lambda: w.controller.plain.measuring, timeout=10_000)
    with qtbot.waitSignal(w.controller.plain.measured, timeout=30_000) as outcome:
        w.controller.chat_settings = ChatSettings(max_tokens=12, speculation="fixed", k=3)
        assert w.controller.send("Thanks")
    assert outcome.args[0].cancelled, "the measurement ends cancelled"
    assert outcome.args[0].tok_s is None, "a cancelled measurement gives no speed"
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=60_000)
    assert w.store.load(w.controller.conversation).messages[-1].stats.tokens == 12
    assert list(w.controller.baselines.entries(main)) == [context_bucket(context)]
