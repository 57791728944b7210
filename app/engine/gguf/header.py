"""Pure-Python GGUF header validation, run before any native loader sees the file.

Native loaders trust the header: a file claiming 1000 tensors in 88 bytes crashes `mx.load`.
Here every count, length and offset is checked against the file's real size and fixed limits
before it is used, so a malformed file is refused with a message instead of a crash.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

MAGIC = b"GGUF"
VERSIONS = (2, 3)
MAX_TENSORS = 1 << 16
MAX_KV = 1 << 16
MAX_KEY_BYTES = 65_535
MAX_STRING_BYTES = 64 << 20
MAX_ARRAY_ITEMS = 1 << 26
MAX_ARRAY_DEPTH = 2  # an array of arrays at most
MAX_DIMS = 4
MAX_ELEMENTS = 1 << 40  # per tensor: products beyond this would overflow C int64 byte sizes
DEFAULT_ALIGNMENT = 32

# GGUF value types -> (name, struct format); STRING = 8 and ARRAY = 9 are handled apart.
SCALARS: dict[int, tuple[str, str]] = {
    0: ("uint8", "<B"),
    1: ("int8", "<b"),
    2: ("uint16", "<H"),
    3: ("int16", "<h"),
    4: ("uint32", "<I"),
    5: ("int32", "<i"),
    6: ("float32", "<f"),
    7: ("bool", "<?"),
    10: ("uint64", "<Q"),
    11: ("int64", "<q"),
    12: ("float64", "<d"),
}
STRING, ARRAY = 8, 9


class GGUFError(ValueError):
    """The file is not a GGUF this importer will accept; the message says why."""


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor as the header describes it; `shape` is in GGUF order (fastest axis first)."""

    name: str
    shape: tuple[int, ...]
    type: int
    offset: int  # absolute offset in the file
    nbytes: int

    @property
    def type_name(self) -> str:
        return GGMLQuantizationType(self.type).name

    @property
    def elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True, slots=True)
class GGUFHeader:
    """Everything the header says, validated: metadata values and tensor placements."""

    path: Path
    version: int
    file_size: int
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    data_offset: int

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)


class _Reader:
    """Bounded little-endian reads over a buffer: never past its end, never silently."""

    def __init__(self, buf: Any, size: int) -> None:
        self.buf, self.size, self.pos = buf, size, 0

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise GGUFError(
                f"truncated file: {what} needs {n:,} bytes at offset {self.pos:,}, file has {self.size:,}"
            )

    def unpack(self, fmt: str, what: str) -> Any:
        n = struct.calcsize(fmt)
        self.need(n, what)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return value

    def string(self, what: str, limit: int = MAX_STRING_BYTES) -> str:
        n = self.unpack("<Q", f"length of {what}")
        if n > limit:
            raise GGUFError(f"{what} claims {n:,} bytes, more than the limit of {limit:,}")
        self.need(n, what)
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.pos += n


def _value(r: _Reader, vtype: int, key: str, depth: int) -> Any:
    if vtype in SCALARS:
        return r.unpack(SCALARS[vtype][1], f"value of {key!r}")
    if vtype == STRING:
        return r.string(f"string value of {key!r}")
    if vtype != ARRAY:
        raise GGUFError(f"key {key!r} has unknown value type {vtype}")
    if depth >= MAX_ARRAY_DEPTH:
        raise GGUFError(f"key {key!r} nests arrays deeper than {MAX_ARRAY_DEPTH} levels")
    etype = r.unpack("<I", f"array type of {key!r}")
    count = r.unpack("<Q", f"array length of {key!r}")
    if count > MAX_ARRAY_ITEMS:
        raise GGUFError(f"array {key!r} claims {count:,} items, limit {MAX_ARRAY_ITEMS:,}")
    if etype in SCALARS:
        size = struct.calcsize(SCALARS[etype][1])
        r.need(count * size, f"array {key!r} of {count:,} {SCALARS[etype][0]}")
        items = struct.unpack_from(f"<{count}{SCALARS[etype][1][1]}", r.buf, r.pos)
        r.pos += count * size
        return list(items)
    if etype not in (STRING, ARRAY):
        raise GGUFError(f"array {key!r} has unknown item type {etype}")
    # Each string or nested array takes at least 8 bytes: refuse counts the file cannot hold.
    r.need(count * 8, f"array {key!r} of {count:,} items")
    return [_value(r, etype, key, depth + 1) for _ in range(count)]


def _tensor(r: _Reader, index: int, file_size: int) -> tuple[str, tuple[int, ...], int, int, int]:
    name = r.string(f"name of tensor {index}", limit=MAX_KEY_BYTES)
    n_dims = r.unpack("<I", f"dimension count of {name!r}")
    if not 1 <= n_dims <= MAX_DIMS:
        raise GGUFError(f"tensor {name!r} has {n_dims} dimensions (1 to {MAX_DIMS} allowed)")
    shape = tuple(r.unpack("<Q", f"dimension of {name!r}") for _ in range(n_dims))
    elements = 1
    for d in shape:
        if d == 0 or d > MAX_ELEMENTS:
            raise GGUFError(f"tensor {name!r} has dimension {d}")
        elements *= d
        if elements > MAX_ELEMENTS:
            raise GGUFError(f"tensor {name!r} shape {shape} has more than {MAX_ELEMENTS:,} elements")
    ttype = r.unpack("<I", f"type of {name!r}")
    try:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(ttype)]
    except (ValueError, KeyError):
        raise GGUFError(f"tensor {name!r} has unknown tensor type {ttype}") from None
    if shape[0] % block:
        raise GGUFError(f"tensor {name!r} rows of {shape[0]} are not whole blocks of {block}")
    nbytes = elements // block * type_size
    if nbytes > file_size:
        raise GGUFError(f"tensor {name!r} needs {nbytes:,} bytes, the file has {file_size:,}")
    offset = r.unpack("<Q", f"offset of {name!r}")
    return name, shape, ttype, offset, nbytes


def _parse(buf: Any, size: int, path: Path) -> GGUFHeader:
    r = _Reader(buf, size)
    r.need(4, "magic")
    magic = bytes(buf[0:4])
    if magic != MAGIC:
        raise GGUFError(f"not a GGUF file: magic is {magic!r}, expected {MAGIC!r}")
    r.pos = 4
    version = r.unpack("<I", "version")
    if version not in VERSIONS:
        raise GGUFError(f"unsupported GGUF version {version} (supported: {VERSIONS})")
    n_tensors = r.unpack("<Q", "tensor count")
    n_kv = r.unpack("<Q", "metadata count")
    # Smallest possible entries: a tensor info is 28 bytes, a key/value pair 13.
    if n_tensors > MAX_TENSORS or n_tensors * 28 > size - r.pos:
        raise GGUFError(f"header claims {n_tensors:,} tensors, impossible in a {size:,}-byte file")
    if n_kv > MAX_KV or n_kv * 13 > size - r.pos:
        raise GGUFError(f"header claims {n_kv:,} metadata keys, impossible in a {size:,}-byte file")

    metadata: dict[str, Any] = {}
    for i in range(n_kv):
        key = r.string(f"metadata key {i}", limit=MAX_KEY_BYTES)
        if key in metadata:
            raise GGUFError(f"duplicate metadata key {key!r}")
        vtype = r.unpack("<I", f"value type of {key!r}")
        metadata[key] = _value(r, vtype, key, 0)

    raw = [_tensor(r, i, size) for i in range(n_tensors)]
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or not 1 <= alignment <= 1 << 16 or alignment & (alignment - 1):
        raise GGUFError(f"general.alignment {alignment!r} is not a power of two up to 65536")
    data_offset = -(-r.pos // alignment) * alignment

    tensors: list[TensorInfo] = []
    names: set[str] = set()
    for name, shape, ttype, offset, nbytes in raw:
        if name in names:
            raise GGUFError(f"duplicate tensor name {name!r}")
        names.add(name)
        if offset % alignment:
            raise GGUFError(f"tensor {name!r} offset {offset} is not aligned to {alignment}")
        start = data_offset + offset
        if start + nbytes > size:
            raise GGUFError(
                f"tensor {name!r} spans bytes {start:,}..{start + nbytes:,}, outside the {size:,}-byte file"
            )
        tensors.append(TensorInfo(name, shape, ttype, start, nbytes))
    spans = sorted((t.offset, t.offset + t.nbytes, t.name) for t in tensors)
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            raise GGUFError(f"tensors {a!r} and {b!r} overlap")
    return GGUFHeader(path, version, size, metadata, tuple(tensors), data_offset)


def read_header(path: str | Path) -> GGUFHeader:
    """Validate and parse a GGUF header; raises GGUFError naming the first problem found."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise GGUFError(f"{path} is not a regular file")
        if size < 24:
            raise GGUFError(f"truncated file: {size} bytes, a GGUF header needs at least 24")
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _parse(mm, size, path)
    except OSError as exc:
        raise GGUFError(f"cannot read {path}: {exc}") from exc
    except (struct.error, OverflowError, MemoryError, RecursionError) as exc:
        raise GGUFError(f"malformed GGUF header: {exc}") from exc
