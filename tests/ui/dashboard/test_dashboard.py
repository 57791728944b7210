"""The dashboard dock: charts driven by recorded telemetry and by the window's live stream."""

from __future__ import annotations

import pytest

from app.engine.decoding.events import Provenance, RoundEvent, TokenEvent
from app.engine.features.baselines import MIN_SAMPLES, context_bucket
from app.engine.protocol import MeasureBaseline, WorkerMessage
from app.ui.chat.settings_dialog import ChatSettings
from app.ui.common.plain_speed import BaselineStatus
from app.ui.dashboard.dashboard import Dashboard
from tests.ui.test_main_window import engine, make_window

RECORDED = [(4, 4), (4, 2), (0, 0), (4, 0), (4, 3)]


def recorded_batch(request: int, step: float = 0.01) -> tuple[WorkerMessage, ...]:
    out, n = [], 0
    for i, (k, acc) in enumerate(RECORDED):
        ids = []
        for j in range(acc + 1):
            out.append(
                WorkerMessage(
                    request,
                    TokenEvent(n, "x", Provenance.DRAFT if j < acc else Provenance.MAIN, n * step, i, n),
                )
            )
            ids.append(n)
            n += 1
        out.append(
            WorkerMessage(
                request,
                RoundEvent(
                    i,
                    k,
                    tuple(range(k)),
                    acc,
                    tuple(ids),
                    0.001 * k,
                    0.02 + 0.002 * k,
                    Provenance.DRAFT if k else Provenance.MAIN,
                ),
            )
        )
    return tuple(out)


def test_charts_show_recorded_telemetry(qtbot, tmp_path):
    d = Dashboard()
    qtbot.addWidget(d)
    d.show()
    d.follow(7, plain_tok_s=40.0)
    d.on_batch(recorded_batch(99))  # another request: ignored
    assert d.rate.points == [], "another answer's speeds are not drawn"
    assert d.k_chart.points == [], "another answer's draft lengths are not drawn"
    d.on_batch(recorded_batch(7))
    assert d.k_chart.points == [(float(i), float(k)) for i, (k, _) in enumerate(RECORDED)]
    assert d.histogram.points == [(0, 1), (1, 0), (2, 1), (3, 1), (4, 1)]
    # position 1: tried 4 times, accepted 3; position 2: tried 3 (after accept), accepted 3
    assert d.acceptance.points[0] == (1, pytest.approx(0.75))
    assert d.acceptance.points[1] == (2, pytest.approx(1.0))
    assert d.rate.reference == 40.0
    assert d.rate.points[-1][1] == pytest.approx(100.0)
    assert "2.50×" in d.summary.text()  # 100 tok/s over a 40 tok/s baseline
    report = d.export(tmp_path / "report")
    text = report.read_text()
    assert "tokens-per-second.png" in text
    png = (tmp_path / "report" / "tokens-per-second.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert (tmp_path / "report" / "rounds.csv").read_text().count("\n") == len(RECORDED) + 1


def test_dashboard_says_when_no_baseline(qtbot):
    d = Dashboard()
    qtbot.addWidget(d)
    d.follow(1, plain_tok_s=None)
    d.on_batch(recorded_batch(1))
    assert d.rate.reference is None
    assert "not measured" in d.summary.text()


def test_baseline_news_applies_to_the_followed_generation_and_its_bucket(qtbot):
    d = Dashboard()
    qtbot.addWidget(d)
    d.follow(7)
    d.on_batch(recorded_batch(7))
    d.set_baseline(BaselineStatus("m", 300, 80.0, request=6))  # an older generation's: ignored
    assert d.rate.reference is None, "an older answer's plain speed is not drawn"
    assert d.baseline_note.text() == "", "an older answer's plain speed is not noted"
    d.set_baseline(BaselineStatus("m", 300, None, request=7))
    assert "not known under the load" in d.baseline_note.text(), "the note says the plain speed is not known"
    assert "~300 tokens" in d.baseline_note.text(), "the note names the context it is for"
    d.set_baseline(BaselineStatus("m", 300, None, measuring=True))
    assert d.baseline_note.text() == "Measuring plain speed at ~300 tokens of context…"
    d.set_baseline(BaselineStatus("m", 2000, 30.0))  # another bucket: not this answer's baseline
    d.set_baseline(BaselineStatus("other", 300, 30.0))  # another model
    assert d.rate.reference is None, "another context's or model's plain speed is not drawn"
    assert "Measuring" in d.baseline_note.text(), "the note still says it is measuring"
    d.set_baseline(BaselineStatus("m", 280, 40.0, plain_range=(38.0, 42.0)))  # same model, same bucket (256)
    assert d.rate.reference == 40.0, "the plain speed for this context is drawn"
    assert d.rate.reference_label == "plain 40.0 tok/s at this context", (
        "the plain line is labelled with its speed"
    )
    assert d.baseline_note.text() == (
        "Plain speed at ~300 tokens of context: 40.0 tok/s (38.0 tok/s to 42.0 tok/s), measured on this "
        "machine for contexts of 256–511 tokens, under the load it has now."
    )
    assert "2.50×" in d.summary.text()


def sent_and_done(qtbot, w, text: str, max_tokens: int = 60) -> int:
    w.controller.chat_settings = ChatSettings(max_tokens=max_tokens)
    assert w.controller.send(text)
    request = w.controller.live.request
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    return request


def test_window_measures_a_missing_baseline_then_compares_with_it(qtbot, specchat_home, tmp_path):
    w = make_window(qtbot, specchat_home)
    engine(w).plain_rate = 100.0
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    w.toggles.dashboard.trigger()
    request = sent_and_done(qtbot, w, "Explain speculation")
    assert w.dashboard.request == request, "the dashboard follows the answer just sent"
    assert w.dashboard.rate.reference is None, "no plain speed is drawn before it is measured"
    context = w.dashboard.baseline.context_tokens
    assert context == w.store.load(w.controller.conversation).messages[-1].stats.prompt_tokens
    qtbot.waitUntil(lambda: "Measuring plain speed at" in w.dashboard.baseline_note.text(), timeout=5000)
    qtbot.waitUntil(lambda: "measured on this machine" in w.dashboard.baseline_note.text(), timeout=10_000)
    baseline = w.controller.baselines.get("/models/main", context)
    assert baseline == pytest.approx(100.0)  # the engine's clock: exact however loaded the machine
    assert w.dashboard.rate.reference == baseline == w.dashboard.telemetry.plain_tok_s
    [run] = w.controller.history.runs()
    assert (run.kind, run.temperature, run.bucket, run.mode) == (
        "prose",
        0.0,
        context_bucket(context),
        "adaptive",
    )
    assert run.speedup == pytest.approx(run.tok_s / baseline)  # filled in when the measurement came
    [row] = w.dashboard.history.rows
    assert row.answers == 1, "the history counts one answer"
    assert w.dashboard.history.cell(0, "Speedup") == f"{run.speedup:.2f}×", (
        "the history shows the answer's speedup"
    )
    assert w.dashboard.history.chart.points == [(1.0, pytest.approx(run.speedup))]

    request = None
    w.controller.chat_settings = ChatSettings(max_tokens=80)
    assert w.controller.send("And again")  # same bucket: compared at once, nothing measured
    qtbot.waitUntil(lambda: w.dashboard.telemetry.token_times != [], timeout=5000)
    assert w.controller.busy, "the second answer is still being written"
    assert w.dashboard.rate.reference == baseline, "it is compared at once with the known plain speed"
    qtbot.waitUntil(lambda: [r.answers for r in w.dashboard.history.rows] == [2], timeout=10_000)
    assert not w.controller.busy
    # none scheduled
    assert w.controller.plain.target is None, "no further plain measurement is scheduled"
    assert not w.controller.plain.measuring, "no plain measurement is running"
    # measured three times, so the speedup can say how sure it is; then nothing more
    assert sum(isinstance(c, MeasureBaseline) for c in engine(w).commands) == MIN_SAMPLES

    report = w.dashboard.export(tmp_path / "report").read_text()
    assert "## History by pair, prompt kind and temperature" in report, "the report has the history heading"
    assert "| prose | greedy | 2 |" in report, "the report lists the two prose answers"
    assert (tmp_path / "report" / "history.csv").read_text().count("\n") == 3
    assert (tmp_path / "report" / "history-speedup.png").read_bytes().startswith(b"\x89PNG")
    w.close()


def test_a_new_message_preempts_the_measurement(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    w.controller.plain.tokens = 1_000_000  # would take hours
    sent_and_done(qtbot, w, "Write a Python function that reverses a list", max_tokens=20)
    qtbot.waitUntil(lambda: w.controller.plain.measuring, timeout=5000)
    with qtbot.waitSignal(w.controller.plain.measured, timeout=5000) as outcome:
        w.controller.chat_settings = ChatSettings(max_tokens=20)
        assert w.controller.send("Now in Rust")
    assert outcome.args[0].cancelled, "the measurement ends cancelled"
    assert outcome.args[0].tok_s is None, "a cancelled measurement gives no speed"
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    answer = w.store.load(w.controller.conversation).messages[-1]
    assert answer.state == "complete", "the new message is answered in full"
    assert answer.stats.tokens == 20, "the new answer has all its tokens"
    assert w.controller.baselines.entries("/models/main") == {}
    assert {r.kind for r in w.controller.history.runs()} == {"code"}
    w.close()


def test_plain_answers_feed_the_baseline_and_are_not_a_pairs_speedup(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    w.controller.chat_settings = ChatSettings(max_tokens=60, speculation="off")
    assert w.controller.send("Explain speculation")
    qtbot.waitUntil(lambda: not w.controller.busy and w.controller.history.runs() != [], timeout=10_000)
    # none scheduled
    assert w.controller.plain.target is None, "a plain answer schedules no measurement"
    assert not w.controller.plain.measuring, "no plain measurement is running"
    [run] = w.controller.history.runs()
    assert run.mode == "off", "the run is recorded as plain"
    assert run.draft == "", "a plain run has no draft"
    assert run.speedup is None, "a plain run has no speedup"
    [sample] = w.controller.baselines.entries("/models/main")[run.bucket]
    assert sample.tok_s == pytest.approx(run.tok_s), "the plain answer is one plain measurement"
    assert w.controller.baselines.get("/models/main", run.context_tokens) is None, (
        "one measurement is not enough to compare with"
    )
    assert run.tok_s == pytest.approx(300.0)  # the synthetic engine's rate, on its exact clock
    assert not any(isinstance(c, MeasureBaseline) for c in engine(w).commands)
    assert w.controller.history.pairs() == [], "a plain answer is no pair in the history"
    assert w.dashboard.history.rows == [], "the dashboard lists no pair for it"
    w.close()
