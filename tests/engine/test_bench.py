"""The benchmark runs every mode on the same pair and reports comparable numbers."""

from __future__ import annotations

import json
import subprocess
import sys

from app.engine.bench import BUILTIN_PROMPTS, PROMPT_CLASSES, run_benchmark

REQUIRED = {
    "prompt_id", "prompt_class", "mode", "k", "temperature", "tokens", "seconds", "tok_per_s",
    "proposed", "accepted", "rounds", "identical_to_plain",
}


def test_builtin_prompts_cover_every_class():
    assert {p.prompt_class for p in BUILTIN_PROMPTS} == set(PROMPT_CLASSES)


def test_modes_run_interleaved_and_greedy_speculation_matches_plain(toy_pair):
    prompts = [p for p in BUILTIN_PROMPTS if p.id in ("code-1", "repetitive-1")]
    runs = list(run_benchmark(toy_pair, prompts, k=3, max_tokens=24, warmup_tokens=2))
    assert [(r.prompt_id, r.mode) for r in runs] == [
        (p.id, m) for p in prompts for m in ("plain", "mlx_lm", "fixed")
    ]
    for r in runs:
        assert REQUIRED <= set(r.to_json())
        assert r.tokens > 1 and r.tok_per_s > 0
        assert r.identical_to_plain, f"{r.mode} on {r.prompt_id} diverged from plain decoding"
        if r.mode != "plain":
            assert r.proposed > 0 and 0 <= r.accepted <= r.proposed


def test_bench_command_prints_ratios_and_writes_json(toy_models, tmp_path):
    out = tmp_path / "runs.json"
    result = subprocess.run(
        [sys.executable, "-m", "app", "bench", "--main", str(toy_models.main), "--draft", str(toy_models.draft),
         "--max-tokens", "12", "--classes", "code", "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "×plain" in result.stdout and "×mlx_lm" in result.stdout
    runs = json.loads(out.read_text())
    assert {r["mode"] for r in runs} == {"plain", "mlx_lm", "fixed"} and all(REQUIRED <= set(r) for r in runs)


def test_bench_refuses_draft_modes_without_a_draft(toy_models):
    result = subprocess.run(
        [sys.executable, "-m", "app", "bench", "--main", str(toy_models.main), "--modes", "plain,fixed"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2 and "need a draft model" in result.stderr
