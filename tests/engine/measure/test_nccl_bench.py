"""The sharding benchmark: greedy speculation equals plain decoding, and a main sharded over two
CPU ring ranks decodes the same tokens as one rank."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
import pytest

from app.engine.measure import nccl_bench
from app.engine.measure.tp_decode import first_divergence, plain_decode, speculative_decode
from app.engine.measure.tp_models import build_pair

ROOT = Path(__file__).resolve().parents[3]
TINY_ARGS = ["--size", "tiny", "--dtype", "float32", "--device", "cpu", "--backend", "ring"]
TINY_ARGS += ["--tokens", "24", "--prompt-len", "8", "--k", "2,4", "--repeats", "1"]


def test_speculative_greedy_equals_plain() -> None:
    mx.set_default_device(mx.cpu)
    pair = build_pair("tiny", seed=3, dtype=mx.float32, draft_layers=2, group=None)
    prompt = [5, 17, 99, 3, 42, 7]
    plain = plain_decode(pair.main, prompt, 30)
    assert len(plain.tokens) == 30 and len(set(plain.tokens)) > 3
    accepted = 0
    for k in (1, 2, 4):
        spec = speculative_decode(pair.main, pair.draft, prompt, 30, k)
        assert spec.tokens == plain.tokens
        accepted += spec.accepted
    # the shared embedding and head make the draft a useful one
    assert accepted > 0


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


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _run_ranks(tmp_path: Path, extra: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """Two ring ranks on this machine, started as mlx.launch starts them (MLX_HOSTFILE, MLX_RANK)."""
    hostfile = tmp_path / "hosts.json"
    hostfile.write_text(json.dumps([[f"127.0.0.1:{p}"] for p in _free_ports(2)]))
    cmd = [sys.executable, "-m", "app.engine.measure.nccl_bench", *TINY_ARGS, *extra]
    procs = []
    for rank in range(2):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MLX_HOSTFILE": str(hostfile), "MLX_RANK": str(rank)}
        procs.append(
            subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    done = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(cmd, p.returncode, out, err))
    return done


def test_two_ring_ranks_decode_like_one(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    env = {k: v for k, v in os.environ.items() if k not in nccl_bench.LAUNCH_ENV}
    one = subprocess.run(
        [sys.executable, "-m", "app.engine.measure.nccl_bench", *TINY_ARGS, "--json", str(base)],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert one.returncode == 0, one.stderr
    sharded = tmp_path / "sharded.json"
    ranks = _run_ranks(tmp_path, ["--baseline", str(base), "--json", str(sharded)])
    assert [r.returncode for r in ranks] == [0, 0], [r.stderr for r in ranks]
    assert ranks[1].stdout == ""  # only rank 0 reports
    header = next(line for line in ranks[0].stdout.splitlines() if line.strip().startswith("mode"))
    assert header.split("  ") and all(column in header for column in nccl_bench.COLUMNS)
    result = json.loads(sharded.read_text())
    baseline = json.loads(base.read_text())
    assert (result["world"], baseline["world"]) == (2, 1)
    assert result["plain"]["tokens"] == baseline["plain"]["tokens"]
    assert result["vs_baseline"]["plain_diverges_at"] is None
    for k in ("2", "4"):
        assert result["speculative"][k]["tokens"] == baseline["plain"]["tokens"]
        assert result["speculative"][k]["pass"]["all_sum_ms"] is not None
    assert baseline["plain"]["pass"]["all_sum_ms"] is None
    assert "equal the 1-rank baseline" in ranks[0].stdout


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
