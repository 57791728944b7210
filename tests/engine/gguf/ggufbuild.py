"""Hand-built GGUF bytes for tests: valid files to corrupt, and malformed headers."""

from __future__ import annotations

import struct
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
