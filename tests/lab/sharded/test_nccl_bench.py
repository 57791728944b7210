"""The sharding benchmark: greedy speculation equals plain decoding with real acceptance, and a
toy main sharded over two CPU ring ranks decodes the same tokens as one rank."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn
import pytest

from app.engine.measure.toy_shapes import FIRST_TEXT_ID, pair_spec
from lab.sharded import local_launch, nccl_bench
from lab.sharded.tp_decode import first_divergence, plain_decode, speculative_decode
from lab.sharded.tp_models import LocalPartial, SplitError, build_sharded_pair, check_splits

nn: Any = mlx.nn  # mlx declares no types for its modules
ROOT = Path(__file__).resolve().parents[3]
TINY_ARGS = ["--pair", "tiny", "--agreement", "0.9", "--device", "cpu", "--backend", "ring"]
TINY_ARGS += ["--tokens", "20", "--prompt-len", "8", "--k", "2,4", "--repeats", "1"]


@pytest.mark.parametrize("agreement", [0.9, 0.0])
def test_speculative_greedy_equals_plain(agreement: float) -> None:
    mx.set_default_device(mx.cpu)
    pair = build_sharded_pair("tiny", agreement, seed=3, group=None)
    prompt = pair.cycle(FIRST_TEXT_ID + 5, 6)
    plain = plain_decode(pair.main, prompt, 30)
    # the main continues its own cycle, far from any tie
    assert plain.tokens == pair.cycle(int(pair.successor[prompt[-1]]), 30)
    assert min(plain.margins) > 5.0
    for k in (1, 2, 4):
        spec = speculative_decode(pair.main, pair.draft, prompt, 30, k)
        assert spec.tokens == plain.tokens
        if agreement == 0.0:
            assert spec.accepted == 0
        else:
            assert spec.accepted / spec.rounds > 0.5 * k


def test_local_partial_is_the_projection_without_its_sum() -> None:
    mx.set_default_device(mx.cpu)
    linear = nn.Linear(128, 64, bias=True)
    quantized = nn.QuantizedLinear.from_linear(linear, 64, 4)
    x = mx.random.normal((1, 3, 128))
    for layer in (linear, quantized):
        assert mx.allclose(LocalPartial(layer)(x), layer(x)).item()


def test_splits_follow_the_head_counts(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("14b-bf16", "7b-4bit"):
        for world in (1, 2, 4):
            check_splits(pair_spec(name), world)
    # 1.5B has 2 KV heads
    with pytest.raises(SplitError, match="KV heads"):
        check_splits(pair_spec("1.5b-bf16"), 4)
    assert nccl_bench.main(["--pair", "7b-4bit", "--ranks", "3"]) == 2
    assert "28 heads do not split over 3 ranks" in capsys.readouterr().err


def test_first_divergence() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3, 4]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1


def test_no_launcher_means_one_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in nccl_bench.LAUNCH_ENV:
        monkeypatch.delenv(name, raising=False)
    assert nccl_bench.init_group("nccl") is None


def test_missing_backend_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MLX_RANK", "0")
    assert nccl_bench.main([*TINY_ARGS[:-2], "--backend", "no-such-backend"]) == 2
    assert "no-such-backend" in capsys.readouterr().err


# 4 bits is the same decode loop over quantized weights
@pytest.mark.parametrize("bits", ["16", pytest.param("4", marks=pytest.mark.heavy)])
def test_two_ring_ranks_decode_like_one(tmp_path: Path, bits: str) -> None:
    base = tmp_path / "base.json"
    env = {k: v for k, v in os.environ.items() if k not in nccl_bench.LAUNCH_ENV}
    one = subprocess.run(
        [
            sys.executable,
            "-m",
            "lab.sharded.nccl_bench",
            *TINY_ARGS,
            "--bits",
            bits,
            "--json",
            str(base),
        ],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert one.returncode == 0, one.stderr
    sharded = tmp_path / "sharded.json"
    two = subprocess.run(
        [
            sys.executable,
            "-m",
            "lab.sharded.nccl_bench",
            *TINY_ARGS,
            "--bits",
            bits,
            "--ranks",
            "2",
        ]
        + ["--baseline", str(base), "--json", str(sharded)],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert two.returncode == 0, two.stderr
    # only rank 0 reports
    assert sum(line.strip().startswith("mode") for line in two.stdout.splitlines()) == 1
    header = next(line for line in two.stdout.splitlines() if line.strip().startswith("mode"))
    assert header.split("  ") and all(column in header for column in nccl_bench.COLUMNS)
    result = json.loads(sharded.read_text())
    baseline = json.loads(base.read_text())
    assert (result["world"], baseline["world"]) == (2, 1)
    assert result["plain"]["tokens"] == baseline["plain"]["tokens"]
    assert result["plain"]["follows_cycle"] and baseline["plain"]["follows_cycle"]
    assert result["vs_baseline"]["plain_diverges_at"] is None
    for k in ("2", "4"):
        assert result["speculative"][k]["tokens"] == baseline["plain"]["tokens"]
        assert result["speculative"][k]["pass"]["all_sum_ms"] is not None
        assert result["speculative"][k]["pass"]["local_ms"] is not None
        # at agreement 0.9 most drafted tokens are kept, on one rank and on two
        for run in (result, baseline):
            assert run["speculative"][k]["accepted_per_round"] > 0.5
            assert run["speculative"][k]["speedup"] > 0
    assert baseline["plain"]["pass"]["all_sum_ms"] is None
    assert "equal the 1-rank baseline" in two.stdout


def test_compare_reports_the_margin_where_tokens_part() -> None:
    baseline = {"world": 1, "plain": {"tokens": [4, 5, 6, 7], "margins": [1.0, 0.5, 0.01, 2.0]}}
    result = {
        "plain": {"tokens": [4, 5, 9, 7], "margins": [1.0, 0.5, 0.02, 2.0]},
        "speculative": {"3": {"tokens": [4, 5, 6, 7]}},
    }
    vs = nccl_bench.compare(result, baseline)
    assert vs["plain_diverges_at"] == 2
    assert (vs["baseline_margin"], vs["margin"]) == (0.01, 0.02)
    assert vs["spec_k3_diverges_at"] is None


def test_rank_envs_match_mlx_launch(tmp_path: Path) -> None:
    ring = local_launch.rank_envs(2, "ring", tmp_path)
    assert [e["MLX_RANK"] for e in ring] == ["0", "1"]
    hosts = json.loads(Path(ring[0]["MLX_HOSTFILE"]).read_text())
    assert len(hosts) == 2 and len({h[0] for h in hosts}) == 2
    nccl = local_launch.rank_envs(2, "nccl", tmp_path)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in nccl] == ["0", "1"]
    assert {e["MLX_WORLD_SIZE"] for e in nccl} == {"2"}, "every NCCL rank knows the world has two ranks"
    assert len({e["NCCL_PORT"] for e in nccl}) == 1, "both NCCL ranks meet on one port"
