"""The dashboard's aggregator, fed a recorded generation with known answers."""

from __future__ import annotations

import csv
import io

import pytest

from app.engine.decoding.events import Decision, Provenance, Reason, RoundEvent, TokenEvent
from app.engine.features.telemetry import (
    CSV_FIELDS,
    RATE_POINT_S,
    RATE_WINDOW_S,
    Telemetry,
    export_report,
    markdown_report,
)
from app.engine.policy.oracle import RoundRecord, best_fixed

# (k, accepted) per round; every round emits accepted + 1 tokens, 10 ms per token of engine time
RECORDED = [(4, 4), (4, 2), (0, 0), (4, 0), (4, 3), (2, 2), (0, 0), (4, 1)]


def replay(t: Telemetry, rounds=RECORDED, step: float = 0.01) -> None:
    n = 0
    for i, (k, acc) in enumerate(rounds):
        emitted = []
        for j in range(acc + 1):
            src = Provenance.DRAFT if j < acc else Provenance.MAIN
            t.token(TokenEvent(n, "x", src, n * step, i, n))
            emitted.append(n)
            n += 1
        verify = 0.02 + 0.002 * k
        t.round(
            RoundEvent(
                i,
                k,
                tuple(range(k)),
                acc,
                tuple(emitted),
                0.001 * k,
                verify,
                Provenance.DRAFT if k else Provenance.MAIN,
                Decision(Reason.BYPASS, 0, expected_speedup=1.0)
                if k == 0
                else Decision(Reason.BEST, k, expected_speedup=1.5),
            )
        )


def test_series_match_the_recorded_rounds():
    t = Telemetry(plain_tok_s=50.0)
    replay(t)
    assert t.k_series == [(i, k) for i, (k, _) in enumerate(RECORDED)]
    # position 1 tried in all 6 drafting rounds, accepted in 5 (all but the 0-accept round)
    assert t.trials[0] == 6 and t.hits[0] == 5
    assert t.acceptance_by_position[0] == pytest.approx(5 / 6)
    # histogram of accepted drafts in drafting rounds: 0,1,2,2,3,4
    assert t.histogram == [1, 1, 2, 1, 1]
    tokens = sum(a + 1 for _, a in RECORDED)
    assert len(t.token_times) == tokens
    s = t.summary()
    assert s.tok_s == pytest.approx(100.0)  # one token per 10 ms
    assert s.achieved_speedup == pytest.approx(2.0)
    assert s.acceptance == pytest.approx(12 / 22)
    assert s.rounds == len(RECORDED)


def test_windowed_rate_uses_engine_time():
    t = Telemetry()
    replay(t, step=0.05)
    assert t.tok_s and all(rate == pytest.approx(20.0) for _, rate in t.tok_s)
    assert t.tok_s[-1][0] == pytest.approx(t.token_times[-1])


def test_oracle_predicts_from_measured_rounds():
    t = Telemetry()
    replay(t)
    o = t.oracle()
    assert o is not None and 1 <= o.best_k <= 4
    assert t.summary().oracle_speedup == pytest.approx(o.predicted_speedup)


def test_empty_telemetry_is_safe():
    s = Telemetry().summary()
    assert s.tokens == 0, "no tokens recorded"
    assert s.achieved_speedup is None, "no speedup without rounds"
    assert s.oracle_k is None, "no best k without rounds"
    assert "not measured" in markdown_report(Telemetry())


def test_csv_and_markdown_export(tmp_path):
    t = Telemetry(plain_tok_s=50.0)
    replay(t)
    rows = list(csv.DictReader(io.StringIO(t.csv_text())))
    assert tuple(rows[0]) == CSV_FIELDS, "the CSV has the documented columns"
    assert len(rows) == len(RECORDED), "one row per recorded round"
    assert [int(r["k"]) for r in rows] == [k for k, _ in RECORDED]
    assert rows[2]["bypassed"] == "True"
    report = export_report(t, tmp_path / "r", {"Tokens per second": b"\x89PNG fake"})
    text = report.read_text()
    assert "2.00×" in text, "the report gives the speedup"
    assert "![Tokens per second](tokens-per-second.png)" in text, "the report shows the chart"
    assert (tmp_path / "r" / "tokens-per-second.png").read_bytes() == b"\x89PNG fake"
    assert (tmp_path / "r" / "rounds.csv").read_text() == t.csv_text()


def test_toy_pair_generation_feeds_telemetry(toy_pair, toy_prompt):
    from app.engine.decoding.decode import generate
    from app.engine.decoding.policy import FixedDraftLength
    from app.engine.decoding.session import ChatSession

    t = Telemetry()
    for event in generate(ChatSession(toy_pair), toy_prompt, policy=FixedDraftLength(3), max_tokens=24):
        if isinstance(event, TokenEvent):
            t.token(event)
        elif isinstance(event, RoundEvent):
            t.round(event)
    assert len(t.token_times) == 24 or t.rows
    assert sum(t.histogram) == sum(1 for r in t.rows if r.k)
    assert all(0.0 <= a <= 1.0 for a in t.acceptance_by_position)


def _windowed_rates(times: list[float]) -> list[tuple[float, float]]:
    """The rate series by its definition: tokens after the first in the last second, over their
    span; of the points within RATE_POINT_S of a stretch's first, the last."""
    out: list[tuple[float, float]] = []
    since = 0.0
    for n, t in enumerate(times):
        inside = [u for u in times[: n + 1] if t - u <= RATE_WINDOW_S]
        if t - inside[0] > 0:
            point = (t, (len(inside) - 1) / (t - inside[0]))
            if out and t - since < RATE_POINT_S:
                out[-1] = point
            else:
                out.append(point)
                since = t
    return out


def test_windowed_rate_over_a_long_uneven_stream_matches_its_definition():
    times, t = [], 0.0
    for i in range(3000):  # bursts and pauses, several windows long
        t += 0.0004 if i % 50 else 0.3
        times.append(t)
    telemetry = Telemetry()
    for i, when in enumerate(times):
        telemetry.token(TokenEvent(i, "x", Provenance.MAIN, when, 0, i))
    expected = _windowed_rates(times)
    assert len(expected) < len(times) / 10  # bursts of 0.4 ms a token: a point per 10 ms of them
    assert telemetry.tok_s[-1][0] == times[-1]
    assert [t for t, _ in telemetry.tok_s] == [t for t, _ in expected]
    assert [r for _, r in telemetry.tok_s] == pytest.approx([r for _, r in expected])


def test_oracle_and_figures_kept_as_sums_match_the_rounds_read_again():
    """The dashboard asks every batch: the sums kept as rounds come give what reading every
    round again gives."""
    rounds = [(k, (i * 7 + 3) % (k + 1)) for i, k in enumerate([4, 4, 0, 2, 4, 3, 0, 4] * 40)]
    t = Telemetry()
    replay(t, rounds)
    records = [
        RoundRecord(r.k, r.accepted, r.draft_seconds, r.verify_seconds, r.wall_seconds, r.source, 0)
        for r in t.rows
    ]
    assert t.oracle() is not None and t.oracle() == best_fixed(records, t.max_k)
    drafting = [r for r in t.rows if r.k]
    f = t.figures()
    assert f.proposed == sum(r.k for r in drafting) and f.accepted == sum(r.accepted for r in drafting)
