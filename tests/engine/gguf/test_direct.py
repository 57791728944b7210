"""GGUF quantized blocks repacked into MLX's layout dequantize to exactly the GGUF values."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from gguf.constants import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

from app.engine.gguf.architectures import ARCHITECTURES
from app.engine.gguf.direct import FORMATS, can_repack, pack, repack
from app.engine.gguf.header import TensorInfo


def _blocks(qtype: T, rows: int, cols: int, seed: int) -> bytes:
    """Real quantizer output where gguf has one; otherwise random blocks with finite headers."""
    rng = np.random.default_rng(seed)
    if qtype not in (T.Q4_K, T.Q5_K):
        return quantize(rng.normal(size=(rows, cols)).astype(np.float32), qtype).tobytes()
    fmt = FORMATS[int(qtype)]
    blocks = rng.integers(0, 256, size=(rows * cols // fmt.block_values, fmt.block_bytes), dtype=np.uint8)
    headers = rng.uniform(0.001, 0.05, size=(len(blocks), 2)).astype(np.float16)  # d and dmin
    blocks[:, :4] = headers.view(np.uint8)
    return blocks.tobytes()


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K])
def test_repack_is_exact(qtype: T) -> None:
    raw = _blocks(qtype, 12, 512, int(qtype))
    info = TensorInfo("x", (512, 12), int(qtype), 0, len(raw))
    assert can_repack(info)
    q, scales, biases, bits = repack(raw, info, chunk_values=1000)  # several row chunks
    assert bits == {"Q8_0": 8, "Q5_0": 5, "Q5_1": 5, "Q5_K": 5}.get(qtype.name, 4)
    got = mx.dequantize(mx.array(q), mx.array(scales), mx.array(biases), group_size=32, bits=bits)
    want = dequantize(np.frombuffer(raw, np.uint8).reshape(12, -1), qtype).reshape(12, 512)
    np.testing.assert_allclose(np.array(got), want, rtol=0, atol=1e-6 * np.abs(want).max())


def test_k_quant_rows_must_hold_whole_super_blocks() -> None:
    assert not can_repack(TensorInfo("x", (96, 4), int(T.Q4_K), 0, 0))
    assert not can_repack(TensorInfo("x", (256, 4), int(T.Q6_K), 0, 0))  # stored at 8 bits instead


@pytest.mark.parametrize("bits", [4, 5, 6, 8])
def test_packing_is_the_layout_mlx_reads(bits: int) -> None:
    """MLX's own dequantize reads our bit stream back as the same integers (unit scale)."""
    q = np.random.default_rng(bits).integers(0, 1 << bits, size=(3, 64)).astype(np.uint8)
    ones, zeros = mx.ones((3, 2)), mx.zeros((3, 2))
    got = mx.dequantize(mx.array(pack(q, bits)), ones, zeros, group_size=32, bits=bits)
    np.testing.assert_array_equal(np.array(got), q.astype(np.float32))


def test_row_permutation_commutes_with_repacking() -> None:
    w = np.random.default_rng(1).normal(size=(8, 64)).astype(np.float32)
    raw = quantize(w, T.Q4_1).tobytes()
    q, s, b, bits = repack(raw, TensorInfo("x", (64, 8), int(T.Q4_1), 0, len(raw)))
    config = {"num_attention_heads": 2, "num_key_value_heads": 2}
    name = "model.layers.0.self_attn.q_proj.weight"
    unpermute = ARCHITECTURES["llama"].transform
    assert unpermute is not None, "llama's Q and K rows need reordering from GGUF's order"
    parts = [mx.array(unpermute(name, a, config)) for a in (q, s, b)]
    got = mx.dequantize(*parts, group_size=32, bits=bits)
    want = unpermute(name, dequantize(np.frombuffer(raw, np.uint8).reshape(8, -1), T.Q4_1), config)
    np.testing.assert_array_equal(np.array(got), want.reshape(8, 64))
