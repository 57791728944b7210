"""The UI benchmark's verdict: every target is printed with its figure, and any one missed fails."""

from __future__ import annotations

import argparse

import pytest

import app.devtools.bench as bench
from app.cli import ui_bench


def result(stall_p99: float = 20.0, mb_per_2000: float = 1.5, tokens: int = 20_000) -> bench.BenchResult:
    samples = tuple((n, 140 + mb_per_2000 * n / 2000) for n in range(0, tokens + 1, 2000))
    return bench.BenchResult(
        tokens, 900, 900, True, 0.5, stall_p99, 80.0, 3.0, samples, 10.0, (tokens, samples[-1][1])
    )


def verdict_of(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], r: bench.BenchResult):
    monkeypatch.setattr(bench, "run", lambda rate, tokens: r)
    code = ui_bench.run(argparse.Namespace(rate=2000.0, tokens=r.tokens))
    return code, capsys.readouterr().out


def test_a_run_within_every_target_passes_and_says_which_targets(monkeypatch, capsys):
    code, out = verdict_of(monkeypatch, capsys, result())
    assert code == 0 and out.rstrip().endswith("PASS")
    assert "met: event-loop stall p99 under 50 ms (20.0 ms)" in out
    assert "met: memory growth at most 2 MB per 2,000 tokens after the first 2,000 (1.50 MB" in out


def test_memory_growing_past_2_mb_per_2000_tokens_fails_even_with_a_smooth_stream(monkeypatch, capsys):
    code, out = verdict_of(monkeypatch, capsys, result(mb_per_2000=2.4))
    assert code == 1 and out.rstrip().endswith("FAIL")
    assert "MISSED: memory growth at most 2 MB per 2,000 tokens after the first 2,000 (2.40 MB" in out


def test_a_stall_of_50_ms_at_p99_fails(monkeypatch, capsys):
    code, out = verdict_of(monkeypatch, capsys, result(stall_p99=50.0))
    assert code == 1 and "MISSED: event-loop stall p99 under 50 ms (50.0 ms)" in out


def test_a_short_run_cannot_judge_memory_and_says_so(monkeypatch, capsys):
    code, out = verdict_of(monkeypatch, capsys, result(mb_per_2000=9.0, tokens=3000))
    assert code == 0 and "not judged: memory growth" in out and "needs 4,000 tokens or more" in out
