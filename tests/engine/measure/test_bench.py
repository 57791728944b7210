"""The benchmark runs every mode on the same pair and reports comparable numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from app.engine.blas import BUILTIN, ensure_blas
from app.engine.features.prompts import BUILTIN_PROMPTS, PROMPT_CLASSES
from app.engine.measure.bench import run_benchmark

REQUIRED = {
    "prompt_id",
    "prompt_class",
    "mode",
    "k",
    "temperature",
    "tokens",
    "seconds",
    "tok_per_s",
    "proposed",
    "accepted",
    "rounds",
    "identical_to_plain",
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
        assert set(r.to_json()) >= REQUIRED
        assert r.tokens > 1 and r.tok_per_s > 0
        assert r.identical_to_plain, f"{r.mode} on {r.prompt_id} diverged from plain decoding"
        if r.mode != "plain":
            assert r.proposed > 0 and 0 <= r.accepted <= r.proposed


def test_bench_command_prints_ratios_and_writes_json(toy_models, tmp_path):
    out = tmp_path / "runs.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "bench",
            "--main",
            str(toy_models.main),
            "--draft",
            str(toy_models.draft),
            "--max-tokens",
            "12",
            "--classes",
            "code",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "×plain" in result.stdout and "×mlx_lm" in result.stdout
    # the child finds the same BLAS this process loaded (tests/conftest.py), and names it
    assert f"BLAS: {ensure_blas().describe()}" in result.stdout.splitlines()
    runs = json.loads(out.read_text())
    assert {r["mode"] for r in runs} == {"plain", "mlx_lm", "fixed"}, "plain, mlx_lm and fixed are all run"
    assert all(set(r) >= REQUIRED for r in runs), "every run has every documented field"


def test_bench_refuses_draft_modes_without_a_draft(toy_models):
    result = subprocess.run(
        [sys.executable, "-m", "app", "bench", "--main", str(toy_models.main), "--modes", "plain,fixed"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, "fixed without a draft is a usage error (exit 2)"
    assert "need a draft model" in result.stderr, "the error says a draft model is needed"


def test_without_a_draft_mlx_lm_is_its_plain_loop_and_ours_keeps_up(toy_pair):
    """Our plain decoding against mlx-lm's plain loop, same prompts: the same tokens, and no
    round of ours reported as speculation."""
    import dataclasses

    plain_pair = dataclasses.replace(toy_pair, draft=None)
    prompts = [p for p in BUILTIN_PROMPTS if p.id == "code-1"]
    runs = list(run_benchmark(plain_pair, prompts, modes=("plain", "mlx_lm"), max_tokens=24, warmup_tokens=2))
    assert [r.mode for r in runs] == ["plain", "mlx_lm"]
    assert all(r.identical_to_plain for r in runs), "both plain modes give plain's answer"
    assert all(r.tokens > 1 for r in runs), "both plain modes give tokens"
    assert all(r.proposed == 0 for r in runs), "neither drafts"


def test_off_is_plain_as_everywhere_else(toy_pair):
    import dataclasses

    plain_pair = dataclasses.replace(toy_pair, draft=None)
    prompts = [p for p in BUILTIN_PROMPTS if p.id == "code-1"]
    runs = list(run_benchmark(plain_pair, prompts, modes=("off", "plain"), max_tokens=8, warmup_tokens=2))
    assert [r.mode for r in runs] == ["plain"]  # one word for one thing: timed once
    assert runs[0].proposed == 0, "plain drafts nothing"
    assert runs[0].identical_to_plain, "plain is identical to itself"


def test_adaptive_lookup_and_several_fixed_ks_with_the_oracle(toy_pair, tmp_path):
    from app.cli.bench import format_oracle, format_table
    from app.engine.library.store import Store
    from app.engine.policy.modes import SpeculationMode, remembered

    prompts = [p for p in BUILTIN_PROMPTS if p.id == "repetitive-2"]
    modes = ("plain", "fixed", "adaptive", "lookup")
    store = Store(tmp_path / "store.sqlite3")
    runs = list(
        run_benchmark(
            toy_pair, prompts, modes=modes, ks=(1, 3), max_tokens=32, warmup_tokens=2, repeats=2, memory=store
        )
    )
    # as in the window, what adaptive learnt about the pair is there for its next session
    again = remembered(store, toy_pair.main.source, toy_pair.draft.source)
    for mode in (SpeculationMode.ADAPTIVE, SpeculationMode.LOOKUP):
        again.policy(mode)
    assert again.restored == {SpeculationMode.ADAPTIVE, SpeculationMode.LOOKUP}
    # the second repeat runs the variants in another order, but reports them in the same one
    assert [r.label for r in runs] == ["plain", "fixed1", "fixed3", "adaptive", "lookup"] * 2
    assert all(r.identical_to_plain for r in runs), "every variant gives plain's answer"
    assert all(r.round_log for r in runs), "every run keeps its round log"
    assert "adaptive" in format_table(runs)
    oracle = format_oracle(runs).splitlines()[1].split()
    drafted = max(x.k for r in runs for x in r.round_log if x.source == "draft")
    assert oracle[0] == "repetitive-2", "the oracle names the prompt"
    assert oracle[1] == "exact", "the oracle names the acceptance rule"
    assert 1 <= int(oracle[2]) <= drafted, "its best k is one the run drafted"
    # the JSON keeps each adaptive round's reason and prediction, so a surprising ratio can be explained
    # (whether it drafts, bypasses or probes depends on this machine's timings)
    adaptive_rounds = [x for r in runs if r.mode == "adaptive" for x in r.to_json()["round_log"]]
    assert {x["why"] for x in adaptive_rounds} <= {"learn", "best", "bypass", "probe"}
    chosen = [x for x in adaptive_rounds if x["why"] in ("best", "bypass", "probe")]
    assert chosen and all(x["expected_speedup"] > 0 for x in chosen)
    # and what each k was predicted to give, so a k not chosen can be explained
    assert all(len(x["draft_speedup_by_k"]) == 8 for x in chosen)
    # and the acceptance estimates behind it: a low prediction is the text's or the prices'
    assert all(len(x["draft_acceptance"]) == 8 for x in chosen)
    assert all(x["why"] == "fixed" for r in runs if r.mode == "fixed" for x in r.to_json()["round_log"])


def test_sampling_runs_compare_exact_and_residual(toy_pair):
    from app.engine.decoding.sampling import SamplingParams

    prompts = [p for p in BUILTIN_PROMPTS if p.id == "code-1"]
    runs = list(
        run_benchmark(
            toy_pair,
            prompts,
            modes=("plain", "fixed"),
            k=2,
            max_tokens=12,
            warmup_tokens=2,
            sampling=SamplingParams(temperature=0.7, seed=0),
        )
    )
    assert [r.label for r in runs] == ["plain", "fixed2/exact", "fixed2/resid"]
    assert all(r.identical_to_plain is None for r in runs[1:])


def test_repeats_are_paired_with_plain_and_plain2_shows_the_noise(toy_useless_pair):
    from app.cli.bench import format_paired

    prompts = [p for p in BUILTIN_PROMPTS if p.id in ("code-1", "prose-1")]
    runs = list(
        run_benchmark(
            toy_useless_pair,
            prompts,
            modes=("plain", "plain2", "adaptive"),
            max_tokens=12,
            warmup_tokens=2,
            repeats=3,
        )
    )
    assert [(r.prompt_id, r.repeat, r.label) for r in runs[:3]] == [
        ("code-1", 0, "plain"),
        ("code-1", 0, "plain2"),
        ("code-1", 0, "adaptive"),
    ]
    assert [r.repeat for r in runs] == [0, 0, 0, 1, 1, 1, 2, 2, 2] * 2
    # plain2 is plain decoding again: the same answer, a different timing
    again = [r for r in runs if r.mode == "plain2"]
    assert all(r.identical_to_plain for r in again), "plain2 gives plain's answer"
    assert all(r.k == 0 for r in again), "plain2 drafts nothing"
    table = format_paired(runs).splitlines()
    row = next(line.split() for line in table if line.startswith("prose-1") and "adaptive" in line)
    ratios = sorted(
        a.tok_per_s / p.tok_per_s
        for a, p in zip(
            [r for r in runs if r.prompt_id == "prose-1" and r.mode == "adaptive"],
            [r for r in runs if r.prompt_id == "prose-1" and r.mode == "plain"],
        )
    )
    assert float(row[2]) == pytest.approx(ratios[1], abs=1e-3)  # the median of three paired ratios
    assert (float(row[3]), float(row[4]), int(row[5])) == (round(ratios[0], 2), round(ratios[2], 2), 3)
    worst = {line.split()[2]: line.split() for line in table if line.startswith("worst prompt")}
    assert set(worst) == {"plain2", "adaptive"}, "the worst prompt is reported per mode"
    assert worst["adaptive"][4] in ("code-1", "prose-1"), "adaptive's worst prompt is one of the prompts run"


def test_bench_header_says_when_mlx_runs_on_its_own_blas(toy_models):
    env = {**os.environ, "SPECCHAT_BLAS": "none"}
    args = [
        "bench",
        "--main",
        str(toy_models.main),
        "--modes",
        "plain",
        "--max-tokens",
        "4",
        "--classes",
        "code",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0, result.stderr
    want = f"BLAS: {BUILTIN} (SPECCHAT_BLAS=none)" if sys.platform.startswith("linux") else "BLAS: "
    assert any(line.startswith(want) for line in result.stdout.splitlines()), result.stdout
