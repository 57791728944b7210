"""The UI benchmark's verdict: every target is printed with its figure, and any one missed fails."""

from __future__ import annotations

import argparse

import pytest

import app.devtools.bench as bench
import app.devtools.bench_text as bench_text
from app.cli import ui_bench


def result(stall_p99: float = 20.0, mb_per_2000: float = 1.5, tokens: int = 20_000) -> bench.BenchResult:
    samples = tuple((n, 140 + mb_per_2000 * n / 2000) for n in range(0, tokens + 1, 2000))
    return bench.BenchResult(
        tokens, 900, 900, True, 0.5, stall_p99, 80.0, 3.0, samples, 10.0, (tokens, samples[-1][1])
    )


def case(name: str, stall_p99: float = 12.0, kept_whole: bool = True) -> bench_text.CaseResult:
    return bench_text.CaseResult(name, f"the {name} case", 20, 15.0, 0.2, stall_p99, 30.0, kept_whole)


def verdict_of(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    r: bench.BenchResult,
    paste: bench_text.CaseResult | None = None,
    switch: bench_text.CaseResult | None = None,
    cases: list[str] | None = None,
):
    monkeypatch.setattr(bench, "run", lambda rate, tokens: r)
    monkeypatch.setattr(bench_text, "paste_case", lambda: paste or case("paste"))
    monkeypatch.setattr(bench_text, "switch_case", lambda: switch or case("switch"))
    code = ui_bench.run(argparse.Namespace(rate=2000.0, tokens=r.tokens, cases=cases))
    return code, capsys.readouterr().out


def test_a_run_within_every_target_passes_and_says_which_targets(monkeypatch, capsys):
    code, out = verdict_of(monkeypatch, capsys, result())
    assert code == 0, "a run within every target exits 0"
    assert out.rstrip().endswith("PASS"), "the verdict ends with PASS"
    assert "met: event-loop stall p99 under 50 ms (20.0 ms)" in out
    assert "met: memory growth at most 2 MB per 2,000 tokens after the first 2,000 (1.50 MB" in out


def test_memory_growing_past_2_mb_per_2000_tokens_fails_even_with_a_smooth_stream(monkeypatch, capsys):
    code, out = verdict_of(monkeypatch, capsys, result(mb_per_2000=2.4))
    assert code == 1, "a run that misses a target exits 1"
    assert out.rstrip().endswith("FAIL"), "the verdict ends with FAIL"
    assert "MISSED: memory growth at most 2 MB per 2,000 tokens after the first 2,000 (2.40 MB" in out


def test_a_stall_of_50_ms_at_p99_fails(monkeypatch, capsys):
    code, out = verdict_of(monkeypatch, capsys, result(stall_p99=50.0))
    assert code == 1, "a stall at the target misses it (exit 1)"
    assert "MISSED: event-loop stall p99 under 50 ms (50.0 ms)" in out, (
        "the verdict names the missed stall target and the figure"
    )


def test_a_short_run_cannot_judge_memory_and_says_so(monkeypatch, capsys):
    code, out = verdict_of(monkeypatch, capsys, result(mb_per_2000=9.0, tokens=3000))
    assert code == 0, "a run too short to judge memory still passes"
    assert "not judged: memory growth" in out, "the verdict says memory growth was not judged"
    assert "needs 4,000 tokens or more" in out, "the verdict says how many tokens it needs"


def test_the_paste_and_switch_cases_are_judged_by_the_same_stall_target(monkeypatch, capsys):
    code, out = verdict_of(monkeypatch, capsys, result())
    assert code == 0, "a run within every target exits 0"
    assert "met: paste: event-loop stall p99 under 50 ms (12.0 ms)" in out, (
        "the paste case is judged by the stall target"
    )
    assert "met: switch: event-loop stall p99 under 50 ms (12.0 ms)" in out
    assert "the paste case" in out and "slowest of 20 steps 15 ms" in out
    code, out = verdict_of(monkeypatch, capsys, result(), switch=case("switch", stall_p99=50.0))
    assert code == 1, "a slow switch misses its target (exit 1)"
    assert "MISSED: switch: event-loop stall p99 under 50 ms (50.0 ms)" in out, (
        "the verdict names the switch case's missed stall"
    )


def test_text_lost_on_the_way_fails_the_case(monkeypatch, capsys):
    code, out = verdict_of(monkeypatch, capsys, result(), paste=case("paste", kept_whole=False))
    assert code == 1, "text lost on the way fails the run (exit 1)"
    assert "MISSED: paste: the text kept, saved and sent whole up to the cap (False)" in out, (
        "the verdict says the paste was not kept whole"
    )


def test_one_case_runs_alone(monkeypatch, capsys):
    code, out = verdict_of(monkeypatch, capsys, result(stall_p99=80.0), cases=["switch"])
    assert code == 0, "the one case asked for passes"
    assert "switch:" in out, "the switch case is reported"
    assert "paste:" not in out, "the paste case is not run"
    assert "tokens streamed" not in out, "the streaming case is not run"
