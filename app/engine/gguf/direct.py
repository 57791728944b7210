"""Q4_0, Q4_1 and Q8_0 repacked straight into MLX's affine quantized layout (group size 32).

These GGUF blocks are already "scale * q + offset" over 32 values, which is exactly MLX's affine
quantization, so a quantized import can keep the file's own weights instead of dequantizing and
quantizing them a second time (which costs a small model much of its accuracy).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.engine.gguf.header import TensorInfo

GROUP = 32
# GGML type id -> (name, bits, block bytes)
DIRECT_TYPES = {2: ("Q4_0", 4, 18), 3: ("Q4_1", 4, 20), 8: ("Q8_0", 8, 34)}


def can_repack(info: TensorInfo) -> bool:
    return info.type in DIRECT_TYPES and len(info.shape) == 2 and info.shape[0] % GROUP == 0


def _pack(q: np.ndarray, bits: int) -> np.ndarray:
    """Pack unsigned values (rows, n) into uint32 words, first value in the lowest bits."""
    per_word = 32 // bits
    rows, n = q.shape
    q = q.astype(np.uint32).reshape(rows, n // per_word, per_word)
    shifts = (np.arange(per_word, dtype=np.uint32) * bits).reshape(1, 1, per_word)
    return np.bitwise_or.reduce(q << shifts, axis=-1)


def repack(buf: Any, info: TensorInfo) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(packed weight, scales, biases, bits) in numpy order, scales and biases as float32."""
    _, bits, block_bytes = DIRECT_TYPES[info.type]
    cols, rows = info.shape
    blocks = np.frombuffer(buf, dtype=np.uint8, count=info.nbytes, offset=info.offset)
    blocks = blocks.reshape(rows, cols // GROUP, block_bytes)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    if info.type == 8:  # Q8_0: int8 values times d
        q = blocks[..., 2:].view(np.int8).astype(np.int16) + 128
        bias = -128.0 * d
    else:
        start = 2 if info.type == 2 else 4
        qs = blocks[..., start:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # byte j holds values j and j + 16
        if info.type == 2:  # Q4_0: (q - 8) * d
            bias = -8.0 * d
        else:  # Q4_1: q * d + m
            bias = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    packed = _pack(q.reshape(rows, cols).astype(np.uint8), bits)
    return packed, d, bias, bits
