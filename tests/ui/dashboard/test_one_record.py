"""One answer, one set of numbers: the strip, the line under the answer, its tooltip, the dashboard
and its history all show the same speed, speedup, acceptance and accepted per round; switching
conversations shows that conversation's numbers; a slow speed is never written as 0 tok/s."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.engine.decoding.events import TokenEvent
from app.engine.features.arena import ArenaResult, save_results
from app.engine.features.figures import per_round_text, percent_text, speed_text, speedup_text
from app.engine.store.history import Run, RunHistory
from app.ui.chat.settings_dialog import ChatSettings
from app.ui.chat.stats import LiveStats, StatusStrip
from app.ui.common.stats_words import answer_line, figures, summary
from app.ui.dashboard.dashboard import Dashboard
from tests.ui.dashboard.test_dashboard import recorded_batch
from tests.ui.test_main_window import engine, make_window

MAIN, DRAFT = "/models/main", "/models/draft"


def answered(qtbot, w, text: str, max_tokens: int) -> None:
    w.controller.chat_settings = ChatSettings(max_tokens=max_tokens)
    assert w.controller.send(text)
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)


def test_every_view_shows_the_same_numbers_for_one_answer(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    engine(w).plain_rate = 100.0  # what the background measurement of plain speed finds
    w.load_pair(MAIN, DRAFT)
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    w.toggles.dashboard.trigger()
    answered(qtbot, w, "Explain speculation", max_tokens=150)  # long enough for paused rounds too
    # plain speed at this context is measured in the background after the answer; every view then
    # compares with it, the strip and the line under the answer included
    qtbot.waitUntil(lambda: "measured on this machine" in w.dashboard.baseline_note.text(), timeout=10_000)
    qtbot.waitUntil(lambda: "faster than without the draft" in w.strip.text(), timeout=5000)

    answer = w.controller.transcript.last_answer()
    s = answer.stats
    [run] = w.controller.history.runs()
    # the numbers by their definitions, from the answer's own counts and the measured plain speed
    rounds_paused = s.rounds - s.drafting_rounds
    assert rounds_paused > 0  # so "per round" over every round would read differently
    assert s.plain_tokens_per_second == pytest.approx(100.0) == run.plain_tok_s
    speedup = speedup_text(s.tokens_per_second / 100.0)
    acceptance = percent_text(s.accepted / s.proposed)
    per_round = per_round_text(s.accepted / s.drafting_rounds)
    speed = speed_text(s.tokens_per_second)
    assert figures(s).speedup == pytest.approx(run.speedup)

    strip, strip_tip = w.strip.labels["summary"].text(), w.strip.labels["summary"].toolTip()
    line = answer_line(s)
    assert line in w.view.toPlainText()  # the line under the answer, as drawn
    answer_tip = w.view.tooltip_for({"message": answer.key})
    dashboard = w.dashboard.summary.text()
    history = {
        c: w.dashboard.history.cell(0, c) for c in ("Speedup", "Acceptance", "Accepted per round", "Speed")
    }

    assert f"{speedup} faster than without the draft" in strip, "the strip says how much faster"
    assert speedup in line, "the line under the answer gives the speedup"
    assert f"<b>{speedup}</b>" in dashboard, "the dashboard gives the speedup in bold"
    assert history["Speedup"] == speedup, "the history gives the same speedup"
    assert f"{speedup} vs plain" in strip_tip, "the strip's tooltip gives the speedup vs plain"
    assert f"{speedup} vs plain" in answer_tip, "the answer's tooltip gives the same speedup"
    for where in (strip_tip, answer_tip, dashboard):
        assert f"acceptance {acceptance} of guesses kept" in where
        assert f"{per_round} accepted per drafting round" in where
    assert history["Acceptance"] == acceptance, "the history gives the same acceptance"
    assert history["Accepted per round"] == per_round, "the history gives the same accepted per round"
    assert strip.startswith(speed), "the strip starts with the speed"
    assert line.startswith(speed), "the line under the answer starts with the speed"
    assert f"<b>{speed}</b>" in dashboard, "the dashboard gives the speed in bold"
    assert history["Speed"] == speed, "the history gives the same speed"
    # the answer's stored stats carry the plain speed too, so reopening it reads the same
    w.controller.open(w.controller.conversation)
    assert figures(w.controller.transcript.last_answer().stats) == figures(s)
    assert f"{speedup} faster" in w.strip.text()
    w.close()


def test_switching_conversations_shows_that_conversations_numbers(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    w.load_pair(MAIN, DRAFT)
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    answered(qtbot, w, "A short one", max_tokens=20)
    short = w.controller.conversation
    w.controller.new_conversation()
    assert w.strip.labels["summary"].text() == "", "a new conversation shows no numbers in the strip"
    assert w.strip.labels["summary"].toolTip() == "", "a new conversation has no numbers on hover"
    answered(qtbot, w, "A longer one", max_tokens=90)
    long = w.controller.conversation
    assert w.strip.labels["summary"].toolTip().startswith("90 tokens")

    for cid, tokens in ((short, 20), (long, 90), (short, 20)):
        w.sidebar.selected.emit(cid)
        last = w.controller.transcript.last_answer()
        assert last.stats.tokens == tokens
        assert w.strip.labels["summary"].toolTip().startswith(f"{tokens} tokens")
        assert w.strip.labels["summary"].text() == summary(last.stats)
    w.controller.new_conversation()  # no answer yet: no numbers
    assert w.strip.labels["summary"].text() == ""
    w.close()


def test_a_speed_under_one_token_a_second_keeps_its_decimal(qtbot, specchat_home, tmp_path):
    assert speed_text(0.7) == "0.7 tok/s", "a speed under one keeps one decimal"
    assert speed_text(0.04) == "0.04 tok/s", "a speed under 0.1 keeps two decimals"
    assert speed_text(112.4) == "112 tok/s", "a speed over 100 drops its decimals"
    assert speed_text(40.0) == "40.0 tok/s", "a speed under 100 keeps one decimal"
    assert speed_text(None) == "— tok/s", "an unknown speed shows a dash"
    live = LiveStats(mode="adaptive")
    for i in range(8):  # 8 tokens over 10 s of engine time: 0.7 tok/s
        live.tokens += 1
        live.first_time = 0.0
        live.last_time = i * 10 / 7
    stats = live.snapshot()
    strip = StatusStrip()
    qtbot.addWidget(strip)
    strip.show_stats(stats)
    assert strip.labels["summary"].text() == "0.7 tok/s · no draft"
    assert answer_line(stats) == "0.7 tok/s"

    from app.engine.store.conversations import ConversationStore

    history = RunHistory(ConversationStore(tmp_path / "c.sqlite3"))
    run = Run(MAIN, DRAFT, "adaptive", "prose", 0.0, 300, 256, 8, 0.7, None, None, 8, 4, drafting_rounds=2)
    history.record(run)
    d = Dashboard(history=history)
    qtbot.addWidget(d)
    assert d.history.cell(0, "Speed") == "0.7 tok/s"


def test_the_best_fixed_k_is_an_estimate_beside_the_arenas_measurement(qtbot):
    result = ArenaResult(DRAFT, 2.67, 0.8, 2, 53.0, 20.0, best_k_speedup=3.56)
    save_results(MAIN, [result])
    live = LiveStats(mode="adaptive", plain_speed=40.0)
    for message in recorded_batch(8):
        if isinstance(message.event, TokenEvent):
            live.token(message.event)
        else:
            live.round(message.event)
    stats = replace(live.snapshot(), main=MAIN, draft=DRAFT)
    d = Dashboard()
    qtbot.addWidget(d)
    d.follow(7, plain_tok_s=40.0)  # no chat stats: the record comes from the rounds seen here
    d.on_batch(recorded_batch(7))
    text = d.summary.text()
    assert "best fixed draft length k = " in text, "the dashboard gives the best fixed k"
    assert ": estimated " in text, "it says the best k is an estimate"
    assert "arena" not in text, "with no arena result it names no arena"
    d.follow(8, plain_tok_s=40.0, source=lambda: stats)
    d.on_batch(recorded_batch(8))
    text = d.summary.text()
    assert ": estimated " in text, "the best fixed k is still an estimate"
    assert "the draft arena measured 2.67× with this draft" in text, (
        "the arena's measured speedup sits beside it"
    )
    assert f"<b>{speedup_text(figures(stats).speedup)}</b>" in text  # measured: the answer's own record

    from app.engine.features.arena import arena_note, best_k_text

    assert best_k_text(result) == "2 (estimated 3.56×)"
    assert arena_note(result) == "arena: 2.67× vs plain (measured), 80% accepted, best k 2 (estimated 3.56×)"
