"""The multi-Mac speed model's arithmetic, checked against hand-computed cases."""

from __future__ import annotations

import dataclasses

import pytest

from lab.sharded import shard_model as sm

TINY = sm.ModelShape(
    name="tiny",
    hidden=1000,
    layers=1,
    heads=4,
    kv_heads=2,
    head_dim=250,
    layer_gb=1.0,
    head_gb=0.0,
    embed_gb=0.0,
    overhead_ms=0.0,
)
SLOW = sm.Link("slow", latency_us=100.0, bandwidth_gbs=1.0)
MAC = sm.Mac("m", bandwidth_gbs=100.0, memory_gb=64.0)
EXACT = sm.Assumptions(efficiency=1.0, verify_growth=0.0)


def test_hand_computed_pass() -> None:
    # two all_sums of 1000 x 2 bytes over 2 hosts: 2 hops x 100 us + 2/2 x 2000 B / 1 GB/s each
    assert sm.comm_ms(TINY, 2, 1, SLOW) == pytest.approx(2 * (0.2 + 0.002))
    # half of 1 GB at 100 GB/s
    assert sm.compute_ms(TINY, MAC, 2, 1, EXACT) == pytest.approx(5.0)
    assert sm.pass_ms(TINY, MAC, 2, 1, SLOW, EXACT) == pytest.approx(5.404)


def test_one_host_sends_nothing() -> None:
    assert sm.comm_ms(TINY, 1, 8, SLOW) == 0.0


def test_comm_grows_with_latency_hosts_and_tokens() -> None:
    faster = dataclasses.replace(SLOW, latency_us=10.0)
    assert sm.comm_ms(TINY, 2, 1, faster) < sm.comm_ms(TINY, 2, 1, SLOW)
    times = [sm.comm_ms(TINY, n, 1, SLOW) for n in (2, 3, 4)]
    assert times == sorted(times) and len(set(times)) == 3
    assert sm.comm_ms(TINY, 2, 6, SLOW) > sm.comm_ms(TINY, 2, 1, SLOW)


def test_verify_pass_pays_latency_once() -> None:
    # six tokens in one pass cost far less communication than six one-token passes
    assert sm.comm_ms(TINY, 4, 6, SLOW) < 1.1 * sm.comm_ms(TINY, 4, 1, SLOW)


def test_expected_tokens() -> None:
    assert sm.expected_tokens(0.5, 1) == pytest.approx(1.5)
    assert sm.expected_tokens(0.5, 3) == pytest.approx(1.875)
    assert sm.expected_tokens(1.0, 4) == 5.0
    assert sm.expected_tokens(0.0, 4) == 1.0


def test_speculative_rate_hand_computed() -> None:
    # k=1, a=0.5: 1.5 tokens per (1 x 2 ms + 10 ms) round
    assert sm.speculative_tok_s(10.0, 2.0, 0.5, 1) == pytest.approx(125.0)


def test_speculation_pays_more_when_latency_dominates() -> None:
    draft = dataclasses.replace(TINY, layer_gb=0.02)
    growing = sm.Assumptions(efficiency=1.0, verify_growth=0.05)
    no_latency = sm.Link("ideal", latency_us=0.0, bandwidth_gbs=1000.0)
    fast = sm.evaluate(TINY, draft, MAC, 4, no_latency, 0.7, growing)
    slow = sm.evaluate(TINY, draft, MAC, 4, dataclasses.replace(SLOW, latency_us=2000.0), 0.7, growing)
    assert slow.comm_share > 0.5 > fast.comm_share
    assert slow.speedup > fast.speedup


def test_best_k_beats_every_fixed_k() -> None:
    draft = dataclasses.replace(TINY, layer_gb=0.05)
    row = sm.evaluate(TINY, draft, MAC, 2, SLOW, 0.8, EXACT, max_k=8)
    verify = sm.pass_ms(TINY, MAC, 2, row.best_k + 1, SLOW, EXACT)
    draft_ms = sm.draft_step_ms(draft, MAC, EXACT)
    assert row.spec_tok_s == pytest.approx(sm.speculative_tok_s(verify, draft_ms, 0.8, row.best_k))
    for k in range(1, 9):
        verify_k = sm.pass_ms(TINY, MAC, 2, k + 1, SLOW, EXACT)
        assert sm.speculative_tok_s(verify_k, draft_ms, 0.8, k) <= row.spec_tok_s + 1e-9


def test_70b_fits_and_splits() -> None:
    a = sm.Assumptions()
    main, draft = sm.LLAMA_70B_4BIT, sm.LLAMA_1B_4BIT
    assert not sm.fits(main, sm.MACS["m4-max-36"], 1, a, draft)
    assert sm.fits(main, sm.MACS["m4-max-36"], 2, a, draft)
    assert sm.fits(main, sm.MACS["m2-ultra-192"], 1, a, draft)
    assert [main.splits_evenly(n) for n in (1, 2, 3, 4)] == [True, True, False, True]


def test_table_output_has_every_host_count(capsys: pytest.CaptureFixture[str]) -> None:
    sm.main(["--mac", "m4-max-36", "--acceptance", "0.7"])
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("N "))
    for column in ("fits", "pass ms", "comm", "plain", "spec", "speedup", "vs 1 Mac"):
        assert column in header
    rows = [line.split() for line in out.splitlines() if line[:2].strip() in {"1", "2", "3", "4"}]
    assert sorted({r[0] for r in rows}) == ["1", "2", "3", "4"]
    assert len(rows) == 1 + 3 * len(sm.LINKS)
