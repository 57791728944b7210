"""The header validator refuses malformed files with a clear message and never crashes."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.engine.gguf.header import GGUFError, read_header
from tests.engine.gguf.ggufbuild import build, gstr, header, kv, tensor_info


def write(tmp_path: Path, data: bytes, name: str = "m.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def refused(tmp_path: Path, data: bytes, match: str) -> None:
    with pytest.raises(GGUFError, match=match):
        read_header(write(tmp_path, data))


def valid_file() -> bytes:
    meta = {"general.architecture": "llama", "tokenizer.ggml.tokens": ["a", "b"], "llama.block_count": 1}
    return build(meta, {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(4)})


def test_valid_file_parses(tmp_path: Path) -> None:
    h = read_header(write(tmp_path, valid_file()))
    assert h.metadata["tokenizer.ggml.tokens"] == ["a", "b"]
    assert [(t.name, t.shape, t.nbytes) for t in h.tensors] == [("w", (4, 3), 48), ("b", (4,), 16)]
    w = np.frombuffer(write(tmp_path, valid_file()).read_bytes()[h.tensors[0].offset :][:48], np.float32)
    assert w.tolist() == list(range(12))


def test_bad_magic(tmp_path: Path) -> None:
    refused(tmp_path, b"GGML" + valid_file()[4:], "not a GGUF file")


def test_bad_version(tmp_path: Path) -> None:
    refused(tmp_path, header(0, 0, version=99) + b"\0" * 64, "unsupported GGUF version 99")


def test_empty_and_tiny_files(tmp_path: Path) -> None:
    refused(tmp_path, b"", "truncated")
    refused(tmp_path, b"GGUF\x03\0\0\0", "truncated")


@pytest.mark.parametrize("cut", [30, 45, 70, 100, -40])
def test_truncated_anywhere(tmp_path: Path, cut: int) -> None:
    with pytest.raises(GGUFError):
        read_header(write(tmp_path, valid_file()[:cut]))


def test_every_truncation_is_refused_cleanly(tmp_path: Path) -> None:
    data = valid_file()
    for cut in range(len(data) - 16):  # the last 16 bytes are padding after the last tensor
        with pytest.raises(GGUFError):
            read_header(write(tmp_path, data[:cut]))


def test_thousand_tensors_in_88_bytes(tmp_path: Path) -> None:
    data = header(1000, 0)
    data += b"\0" * (88 - len(data))
    assert len(data) == 88
    refused(tmp_path, data, "claims 1,000 tensors")


def test_huge_counts(tmp_path: Path) -> None:
    refused(tmp_path, header(2**63, 0) + b"\0" * 64, "tensors, impossible")
    refused(tmp_path, header(0, 2**64 - 1) + b"\0" * 64, "metadata keys, impossible")


def test_huge_key_and_string_lengths(tmp_path: Path) -> None:
    refused(tmp_path, header(0, 1) + struct.pack("<Q", 2**62) + b"\0" * 32, "more than the limit")
    refused(tmp_path, header(0, 1) + struct.pack("<Q", 5000) + b"k" * 40, "truncated")
    body = gstr("k") + struct.pack("<IQ", 8, 2**40) + b"\0" * 32
    refused(tmp_path, header(0, 1) + body, "more than the limit")


def test_huge_array_count(tmp_path: Path) -> None:
    body = gstr("k") + struct.pack("<IIQ", 9, 4, 2**60)
    refused(tmp_path, header(0, 1) + body + b"\0" * 32, "claims")
    body = gstr("k") + struct.pack("<IIQ", 9, 8, 10_000_000)
    refused(tmp_path, header(0, 1) + body + b"\0" * 32, "truncated")


def test_deep_array_nesting(tmp_path: Path) -> None:
    body = gstr("deep") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 5000 + struct.pack("<IQ", 4, 0)
    refused(tmp_path, header(0, 1) + body, "nests arrays deeper")


def test_unknown_value_type(tmp_path: Path) -> None:
    refused(tmp_path, header(0, 1) + gstr("k") + struct.pack("<I", 77) + b"\0" * 32, "unknown value type 77")


def test_duplicate_keys(tmp_path: Path) -> None:
    body = kv("general.name", "a") + kv("general.name", "b")
    refused(tmp_path, header(0, 2) + body + b"\0" * 32, "duplicate metadata key 'general.name'")


def test_duplicate_tensor_names(tmp_path: Path) -> None:
    body = tensor_info("w", (4,), 0, 0) + tensor_info("w", (4,), 0, 32)
    data = header(2, 0) + body
    data += b"\0" * (-len(data) % 32) + b"\0" * 64
    refused(tmp_path, data, "duplicate tensor name 'w'")


def test_offset_outside_file(tmp_path: Path) -> None:
    data = header(1, 0) + tensor_info("w", (8,), 0, 2**40)
    refused(tmp_path, data + b"\0" * 64, "outside the")
    data = header(1, 0) + tensor_info("w", (8,), 0, 2**64 - 32)
    refused(tmp_path, data + b"\0" * 64, "outside the")


def test_tensor_larger_than_file(tmp_path: Path) -> None:
    data = header(1, 0) + tensor_info("w", (2**20, 2**20), 0, 0)
    refused(tmp_path, data + b"\0" * 64, "needs")


def test_element_count_overflow(tmp_path: Path) -> None:
    data = header(1, 0) + tensor_info("w", (2**32, 2**32, 2**32, 2**32), 0, 0)
    refused(tmp_path, data + b"\0" * 64, "elements|dimension")


def test_bad_dims_and_types(tmp_path: Path) -> None:
    data = header(1, 0) + gstr("w") + struct.pack("<I", 9) + b"\0" * 128
    refused(tmp_path, data, "9 dimensions")
    refused(tmp_path, header(1, 0) + tensor_info("w", (8,), 99, 0) + b"\0" * 64, "unknown tensor type 99")
    refused(tmp_path, header(1, 0) + tensor_info("w", (0,), 0, 0) + b"\0" * 64, "dimension 0")
    refused(tmp_path, header(1, 0) + tensor_info("w", (33,), 2, 0) + b"\0" * 64, "whole blocks")


def test_overlapping_and_misaligned(tmp_path: Path) -> None:
    body = tensor_info("a", (16,), 0, 0) + tensor_info("b", (16,), 0, 32)
    data = header(2, 0) + body
    data += b"\0" * (-len(data) % 32) + b"\0" * 128
    refused(tmp_path, data, "overlap")
    data = header(1, 0) + tensor_info("a", (4,), 0, 3)
    refused(tmp_path, data + b"\0" * 64, "not aligned")


def test_bad_alignment(tmp_path: Path) -> None:
    data = header(0, 1) + kv("general.alignment", 3) + b"\0" * 32
    refused(tmp_path, data, "power of two")


def test_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(GGUFError):
        read_header(tmp_path)
    with pytest.raises(GGUFError):
        read_header(tmp_path / "missing.gguf")


def test_random_garbage_never_crashes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    base = valid_file()
    for _ in range(300):
        data = bytearray(base)
        for pos in rng.integers(0, len(data), size=4):
            data[pos] = int(rng.integers(0, 256))
        try:
            read_header(write(tmp_path, bytes(data)))
        except GGUFError:
            pass


def test_malformed_file_in_a_child_exits_cleanly(tmp_path: Path) -> None:
    """The case that crashes mx.load: validation alone must end with an error, not a signal."""
    path = write(tmp_path, header(1000, 0) + b"\0" * 64)
    code = (
        "import sys\nfrom app.engine.gguf.header import read_header, GGUFError\n"
        f"try:\n read_header({str(path)!r})\nexcept GGUFError as e:\n print(e); sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert "1,000 tensors" in done.stdout
