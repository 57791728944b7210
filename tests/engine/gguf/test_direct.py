"""Q4_0 / Q4_1 / Q8_0 blocks repacked into MLX's layout dequantize to exactly the GGUF values."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from gguf.constants import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

from app.engine.gguf.architectures import _unpermute_llama
from app.engine.gguf.direct import can_repack, repack
from app.engine.gguf.header import TensorInfo


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q4_1, T.Q8_0])
def test_repack_is_exact(qtype: T) -> None:
    w = np.random.default_rng(int(qtype)).normal(size=(12, 128)).astype(np.float32)
    raw = quantize(w, qtype).tobytes()
    info = TensorInfo("x", (128, 12), int(qtype), 0, len(raw))
    assert can_repack(info)
    q, scales, biases, bits = repack(raw, info)
    assert bits == (8 if qtype == T.Q8_0 else 4)
    got = mx.dequantize(mx.array(q), mx.array(scales), mx.array(biases), group_size=32, bits=bits)
    want = dequantize(np.frombuffer(raw, np.uint8).reshape(12, -1), qtype).reshape(12, 128)
    np.testing.assert_array_equal(np.array(got), want)


def test_row_permutation_commutes_with_repacking() -> None:
    w = np.random.default_rng(1).normal(size=(8, 64)).astype(np.float32)
    raw = quantize(w, T.Q4_1).tobytes()
    q, s, b, bits = repack(raw, TensorInfo("x", (64, 8), int(T.Q4_1), 0, len(raw)))
    config = {"num_attention_heads": 2, "num_key_value_heads": 2}
    name = "model.layers.0.self_attn.q_proj.weight"
    parts = [mx.array(_unpermute_llama(name, a, config)) for a in (q, s, b)]
    got = mx.dequantize(*parts, group_size=32, bits=bits)
    want = _unpermute_llama(name, dequantize(np.frombuffer(raw, np.uint8).reshape(8, -1), T.Q4_1), config)
    np.testing.assert_array_equal(np.array(got), want.reshape(8, 64))
