"""Hand-built GGUF bytes for tests: valid files to corrupt, and malformed headers."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np


def gstr(s: str | bytes) -> bytes:
    raw = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, value: Any) -> bytes:
    """Encode one key/value pair; ints become uint32, floats float32, lists of str/int arrays."""
    if isinstance(value, bool):
        return gstr(key) + struct.pack("<I?", 7, value)
    if isinstance(value, int):
        return gstr(key) + struct.pack("<II", 4, value)
    if isinstance(value, float):
        return gstr(key) + struct.pack("<If", 6, value)
    if isinstance(value, str):
        return gstr(key) + struct.pack("<I", 8) + gstr(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return gstr(key) + struct.pack("<IIQ", 9, 8, len(value)) + b"".join(gstr(v) for v in value)
    if isinstance(value, list):
        return gstr(key) + struct.pack("<IIQ", 9, 5, len(value)) + struct.pack(f"<{len(value)}i", *value)
    raise TypeError(value)


def header(n_tensors: int, n_kv: int, version: int = 3, magic: bytes = b"GGUF") -> bytes:
    return magic + struct.pack("<IQQ", version, n_tensors, n_kv)


def tensor_info(name: str, shape: tuple[int, ...], ttype: int, offset: int) -> bytes:
    return (
        gstr(name)
        + struct.pack("<I", len(shape))
        + struct.pack(f"<{len(shape)}Q", *shape)
        + struct.pack("<IQ", ttype, offset)
    )


def build(metadata: dict[str, Any], tensors: dict[str, np.ndarray], alignment: int = 32) -> bytes:
    """A valid GGUF of float32 tensors (numpy shape is the reverse of GGUF's)."""
    infos, blobs, offset = [], [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        infos.append(tensor_info(name, tuple(reversed(arr.shape)), 0, offset))
        blob = arr.tobytes()
        blob += b"\0" * (-len(blob) % alignment)
        blobs.append(blob)
        offset += len(blob)
    head = header(len(tensors), len(metadata)) + b"".join(kv(k, v) for k, v in metadata.items())
    head += b"".join(infos)
    head += b"\0" * (-len(head) % alignment)
    return head + b"".join(blobs)


def tiny_llama(path: Path) -> Path:
    """A one-layer llama of float32 tensors with a byte-level tokenizer, importable end to end."""
    rng = np.random.default_rng(0)
    dim, ffn, vocab = 64, 128, 48
    metadata: dict[str, Any] = {
        "general.architecture": "llama",
        "llama.block_count": 1,
        "llama.context_length": 128,
        "llama.embedding_length": dim,
        "llama.feed_forward_length": ffn,
        "llama.attention.head_count": 2,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": [chr(ord("a") + i % 26) * (1 + i // 26) for i in range(vocab)],
        "tokenizer.ggml.merges": [],
    }
    shapes = {
        "token_embd.weight": (vocab, dim),
        "blk.0.attn_norm.weight": (dim,),
        "blk.0.attn_q.weight": (dim, dim),
        "blk.0.attn_k.weight": (dim, dim),
        "blk.0.attn_v.weight": (dim, dim),
        "blk.0.attn_output.weight": (dim, dim),
        "blk.0.ffn_norm.weight": (dim,),
        "blk.0.ffn_gate.weight": (ffn, dim),
        "blk.0.ffn_up.weight": (ffn, dim),
        "blk.0.ffn_down.weight": (dim, ffn),
        "output_norm.weight": (dim,),
        "output.weight": (vocab, dim),
    }
    tensors = {name: rng.normal(size=shape) * 0.1 for name, shape in shapes.items()}
    path.write_bytes(build(metadata, tensors))
    return path
