"""GGUF quantized blocks kept as they are, written in MLX's affine quantized layout (group 32).

Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the Q4_K / Q5_K sub-blocks are all "scale * q + offset" over
32 values, which is exactly MLX's affine quantization with group size 32. Keeping the file's own
integers avoids a second rounding: a 4-bit file dequantized and quantized again to 4 bits loses
much of its agreement with the reference (`tests/engine/gguf/test_weights_oracle.py` compares).

The integers are not unpacked bit by bit here: `gguf.quants` (the format's own reader) gives the
float values, the per-group scale and offset come from the block headers, and
q = (value - offset) / scale recovers them exactly. Q6_K (16-value sub-blocks with their own
scales) has no exact group-32 form; the importer stores it at 8 bits instead (see convert.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.engine.gguf.header import TensorInfo

GROUP = 32


def _f16(blocks: np.ndarray, at: int) -> np.ndarray:
    """The float16 field at byte `at` of every block, as float32."""
    return blocks[..., at : at + 2].copy().view(np.float16)[..., 0].astype(np.float32)


def _k_scales(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K / Q5_K: eight sub-blocks of 32 per 256-value block, scale d*sc and offset -dmin*m."""
    from gguf.quants import Q4_K

    lead = blocks.shape[:-1]
    d, dmin = _f16(blocks, 0)[..., None], _f16(blocks, 2)[..., None]
    sc, m = Q4_K.get_scale_min(blocks[..., 4:16].reshape(-1, 12))
    sc, m = sc.reshape(*lead, 8).astype(np.float32), m.reshape(*lead, 8).astype(np.float32)
    return (d * sc).reshape(*lead[:-1], -1), (-dmin * m).reshape(*lead[:-1], -1)


@dataclass(frozen=True)
class BlockFormat:
    name: str
    bits: int
    block_values: int
    block_bytes: int
    params: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]  # blocks -> (scale, offset) per 32


# GGML type id -> format. Offsets: Q4_0 (q - 8) * d, Q5_0 (q - 16) * d, Q8_0 (q - 128) * d with
# q shifted to unsigned; Q4_1 / Q5_1 q * d + m; K-quants q * d * sc - dmin * m.
FORMATS: dict[int, BlockFormat] = {
    2: BlockFormat("Q4_0", 4, 32, 18, lambda b: (_f16(b, 0), -8.0 * _f16(b, 0))),
    3: BlockFormat("Q4_1", 4, 32, 20, lambda b: (_f16(b, 0), _f16(b, 2))),
    6: BlockFormat("Q5_0", 5, 32, 22, lambda b: (_f16(b, 0), -16.0 * _f16(b, 0))),
    7: BlockFormat("Q5_1", 5, 32, 24, lambda b: (_f16(b, 0), _f16(b, 2))),
    8: BlockFormat("Q8_0", 8, 32, 34, lambda b: (_f16(b, 0), -128.0 * _f16(b, 0))),
    12: BlockFormat("Q4_K", 4, 256, 144, _k_scales),
    13: BlockFormat("Q5_K", 5, 256, 176, _k_scales),
}


def can_repack(info: TensorInfo) -> bool:
    fmt = FORMATS.get(info.type)
    return fmt is not None and len(info.shape) == 2 and info.shape[0] % fmt.block_values == 0


def pack(q: np.ndarray, bits: int) -> np.ndarray:
    """Unsigned `bits`-bit values (rows, n) as MLX stores them: one little-endian bit stream per
    row (value i in bits i*bits ... i*bits+bits-1), read as uint32 words."""
    rows, n = q.shape
    if (n * bits) % 32:
        raise ValueError(f"a row of {n} {bits}-bit values does not fill whole 32-bit words")
    bit_planes = (q.astype(np.uint8)[..., None] >> np.arange(bits, dtype=np.uint8)) & 1
    return np.packbits(bit_planes.reshape(rows, n * bits), axis=-1, bitorder="little").view(np.uint32)


def repack(
    buf: Any, info: TensorInfo, chunk_values: int = 1 << 24
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(packed weight, scales, biases, bits) in numpy order; scales and biases are float32.
    Rows are converted `chunk_values` at a time so a large embedding never exists in float32."""
    fmt = FORMATS[info.type]
    cols, rows = info.shape
    raw = np.frombuffer(buf, dtype=np.uint8, count=info.nbytes, offset=info.offset).reshape(rows, -1)
    packed = np.empty((rows, cols * fmt.bits // 32), dtype=np.uint32)
    scales = np.empty((rows, cols // GROUP), dtype=np.float32)
    biases = np.empty_like(scales)
    step = max(1, chunk_values // cols)
    for start in range(0, rows, step):
        part = slice(start, min(rows, start + step))
        packed[part], scales[part], biases[part] = _repack_rows(raw[part], fmt, info.type)
    return packed, scales, biases, fmt.bits


def _repack_rows(raw: np.ndarray, fmt: BlockFormat, qtype: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize

    rows, cols = raw.shape[0], raw.shape[1] // fmt.block_bytes * fmt.block_values
    values = dequantize(raw, GGMLQuantizationType(qtype)).reshape(rows, cols // GROUP, GROUP)
    scales, biases = (
        a.reshape(rows, cols // GROUP) for a in fmt.params(raw.reshape(rows, -1, fmt.block_bytes))
    )
    safe = np.where(scales == 0, 1.0, scales)[..., None]
    q = np.where(scales[..., None] == 0, 0, np.rint((values - biases[..., None]) / safe))
    q = np.clip(q, 0, (1 << fmt.bits) - 1).astype(np.uint8).reshape(rows, cols)
    return pack(q, fmt.bits), scales, biases
