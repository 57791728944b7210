"""The dashboard dock: charts driven by recorded telemetry and by the window's live stream."""

from __future__ import annotations

import pytest

from app.engine.events import Provenance, RoundEvent, TokenEvent
from app.engine.worker import WorkerMessage
from app.ui.dashboard import Dashboard
from app.ui.settings_dialog import ChatSettings
from tests.ui.test_main_window import make_window

RECORDED = [(4, 4), (4, 2), (0, 0), (4, 0), (4, 3)]


def recorded_batch(request: int, step: float = 0.01) -> tuple[WorkerMessage, ...]:
    out, n = [], 0
    for i, (k, acc) in enumerate(RECORDED):
        ids = []
        for j in range(acc + 1):
            out.append(WorkerMessage(request, TokenEvent(n, "x", Provenance.DRAFT if j < acc else Provenance.MAIN, n * step, i, n)))
            ids.append(n)
            n += 1
        out.append(WorkerMessage(request, RoundEvent(i, k, tuple(range(k)), acc, tuple(ids), 0.001 * k, 0.02 + 0.002 * k,
                                                     Provenance.DRAFT if k else Provenance.MAIN)))
    return tuple(out)


def test_charts_show_recorded_telemetry(qtbot, tmp_path):
    d = Dashboard()
    qtbot.addWidget(d)
    d.show()
    d.follow(7, plain_tok_s=40.0)
    d.on_batch(recorded_batch(99))  # another request: ignored
    assert d.rate.points == [] and d.k_chart.points == []
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


def test_window_forwards_the_live_generation(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None and w.bridge.decode is not None, timeout=5000)
    assert not w.dashboard.isVisible()
    w.dashboard_action.trigger()
    assert w.dashboard.isVisible()
    w.controller.baselines.add("/models/main", 50.0)
    w.controller.chat_settings = ChatSettings(max_tokens=60)
    assert w.controller.send("Explain speculation")
    request = w.controller.live.request
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    assert w.dashboard.request == request
    t = w.dashboard.telemetry
    stats = w.store.load(w.controller.conversation).messages[-1].stats
    assert len(t.token_times) == stats["tokens"] == 60
    assert len(w.dashboard.k_chart.points) == len(t.rows) > 0
    assert sum(n for _, n in w.dashboard.histogram.points) == sum(1 for r in t.rows if r.k)
    assert w.dashboard.rate.reference == 50.0
    w.close()
