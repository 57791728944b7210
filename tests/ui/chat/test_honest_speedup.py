"""The speedup a user reads is this answer's speed over plain decoding measured under the same
conditions (the machine's load, the last half hour), with the range those measurements allow;
against plain measured under other conditions no ratio is shown at all."""

from __future__ import annotations

import re

import pytest

from app.ui.chat.settings_dialog import ChatSettings
from tests.ui.test_main_window import engine, make_window

MAIN, DRAFT = "/models/main", "/models/draft"
SHOWN = re.compile(r"about ([\d.]+)× \(([\d.]+)–([\d.]+)×\) faster than without the draft")


def test_a_speedup_is_shown_only_against_plain_measured_under_the_answers_conditions(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    machine = {"load": 1.0}
    w.controller.baselines.load = lambda: machine["load"]
    fake = engine(w)
    # each background measurement finds the next of these: plain's timing noise, then a busier machine
    rates = iter([95.0, 100.0, 105.0, 47.0, 50.0, 53.0])
    fake.plain_rate = next(rates)
    w.controller.plain.measured.connect(lambda _e: setattr(fake, "plain_rate", next(rates, 50.0)))
    w.controller.plain.tokens = 9  # short measurements: the fake engine's clock is exact
    w.load_pair(MAIN, DRAFT)
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)

    w.controller.chat_settings = ChatSettings(max_tokens=24)
    assert w.controller.send("Explain speculation")
    qtbot.waitUntil(lambda: SHOWN.search(w.strip.text()) is not None, timeout=10_000)
    first = w.controller.transcript.last_answer().stats
    shown = SHOWN.search(w.strip.text())
    assert shown is not None
    low, high = float(shown[2]), float(shown[3])
    true_ratio = first.tokens_per_second / 100.0  # plain's true speed under these conditions
    assert low <= true_ratio <= high, "the range shown holds the true speedup"
    assert low < high, "three measurements that differ give a range, not a point"
    assert shown[0] in w.view.toPlainText(), "the line under the answer says the same"

    machine["load"] = 3.0  # something else now keeps the machine busy: plain decodes at half speed
    context = first.prompt_tokens
    assert w.controller.plain.get(MAIN, context) is None, "plain measured at another load is stale"
    w.controller.plain.idle = lambda: False  # hold the measurement back to see the answer without it
    assert w.controller.send("And again")
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    assert "speedup not measured yet" in w.strip.text(), "no ratio against a stale plain speed"
    assert "×" not in w.strip.text()

    w.controller.plain.idle = lambda: True
    assert w.controller.plain.want(MAIN, w.controller.transcript.last_answer().stats.prompt_tokens)
    qtbot.waitUntil(lambda: SHOWN.search(w.strip.text()) is not None, timeout=10_000)
    second = w.controller.transcript.last_answer().stats
    assert second.plain_tokens_per_second == pytest.approx(50.0), "compared with plain under its own load"
    shown = SHOWN.search(w.strip.text())
    assert shown is not None
    assert float(shown[2]) <= second.tokens_per_second / 50.0 <= float(shown[3])
    runs = w.controller.history.runs()
    assert [r.plain_tok_s for r in runs] == [pytest.approx(100.0), pytest.approx(50.0)], (
        "each answer's history row keeps the plain speed of its own conditions"
    )
    w.close()


def test_on_battery_plain_is_measured_only_when_the_user_asks(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    w.controller.plain.on_battery = lambda: True
    w.load_pair(MAIN, DRAFT)
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    plain = w.controller.plain
    plain.idle = lambda: False  # the answer's own request is held back: the test starts it itself
    w.controller.chat_settings = ChatSettings(max_tokens=12)
    assert w.controller.send("Explain speculation")
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    plain.idle = lambda: True
    context = w.controller.transcript.last_answer().stats.prompt_tokens
    assert plain.want(MAIN, context), "the speedup is not known: a measurement is wanted"
    plain._start()
    assert not plain.measuring, "on battery nothing is measured behind the user's back"
    assert "speedup not measured yet" in w.strip.text()
    w.toggles.measure_on_battery.trigger()  # Models ▸ Measure plain speed on battery too
    plain._start()
    assert plain.measuring, "once asked, it is"
    assert w.settings.value("plain/measure_on_battery", type=bool), "and the choice is kept"
    w.close()
