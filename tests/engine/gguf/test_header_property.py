"""Property tests: whatever bytes a GGUF file holds, the header check accepts or refuses in words.

A user's file may be cut short, overwritten or hand-made; the only acceptable outcomes are a
parsed header or `GGUFError` (a message), never another exception that would crash an import.
"""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine.gguf.header import GGUFError, GGUFHeader, read_header
from tests.engine.gguf.ggufbuild import build

KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz._", min_size=1, max_size=24)
VALUES = st.one_of(
    st.integers(min_value=0, max_value=2**32 - 1),
    st.booleans(),
    st.text(max_size=40),
    st.lists(st.text(max_size=8), max_size=6),
    st.lists(st.integers(min_value=-(2**31), max_value=2**31 - 1), min_size=1, max_size=6),
)


def valid_file() -> bytes:
    meta = {"general.architecture": "llama", "tokenizer.ggml.tokens": ["a", "b"], "llama.block_count": 1}
    return build(meta, {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(4)})


def parse(data: bytes) -> GGUFHeader | GGUFError:
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.gguf"
        path.write_bytes(data)
        try:
            return read_header(path)
        except GGUFError as refusal:
            assert str(refusal), "a refusal must say why"
            return refusal


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_overwritten_bytes_are_parsed_or_refused_in_words(data: st.DataObject) -> None:
    original = valid_file()
    start = data.draw(st.integers(min_value=0, max_value=len(original) - 1))
    patch = data.draw(st.binary(min_size=1, max_size=16))
    damaged = original[:start] + patch + original[start + len(patch) :]
    result = parse(damaged)
    if isinstance(result, GGUFHeader):
        for t in result.tensors:  # whatever was accepted lies inside the file
            assert t.offset >= 0 and t.offset + t.nbytes <= len(damaged)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=256))
def test_arbitrary_bytes_are_parsed_or_refused_in_words(data: bytes) -> None:
    parse(data)
    parse(b"GGUF\x03\x00\x00\x00" + data)  # past the magic and version, into the counts


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=8))
def test_metadata_a_writer_stores_reads_back_unchanged(meta: dict[str, object]) -> None:
    result = parse(build(meta, {"w": np.ones((2, 2), dtype=np.float32)}))
    assert isinstance(result, GGUFHeader)
    for key, value in meta.items():
        read = result.metadata[key]
        if isinstance(value, float):
            assert read == np.float32(value)
        else:
            assert read == value
