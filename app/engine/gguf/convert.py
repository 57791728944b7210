"""GGUF -> MLX model folder, in-process. Run it through `child.run_import` from the app.

Tensors are dequantized with numpy (`gguf.quants`) from bytes whose placement the pure-Python
validator has already checked, then written as MLX affine-quantized safetensors or unquantized
(bfloat16, widened at load where float32 runs faster).
Everything is written to a hidden temporary folder that is renamed into place only at the end;
shards are written there as they fill (shards.py), so memory holds one shard, not the model.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from app.engine.gguf.architectures import Architecture, architecture_of, model_config
from app.engine.gguf.destination import PROVENANCE_FILE
from app.engine.gguf.direct import GROUP as DIRECT_GROUP
from app.engine.gguf.direct import can_repack, repack
from app.engine.gguf.events import ImportEvent, ImportProgress
from app.engine.gguf.header import GGUFError, GGUFHeader, TensorInfo, read_header
from app.engine.gguf.limits import this_machine
from app.engine.gguf.shards import ShardWriter
from app.engine.gguf.tokenizer import build_tokenizer, tokenizer_config
from app.engine.library.memory import available_ram
from app.engine.library.precision import STORED_DTYPE

SUPPORTED_TYPES = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"}
GROUP_SIZE = 64
# Q6_K's 16-value sub-blocks have no exact group-32 form: 8 bits keep them within an eighth of
# their own step, where 4 bits would round them a second time.
WIDE_TYPES, WIDE_BITS = {"Q6_K"}, 8
SHARD_BYTES = 1 << 30
CHUNK_ELEMENTS = 1 << 24  # rows are dequantized this many values at a time
RUNTIME_BYTES = 1 << 30  # the interpreter, numpy, MLX and the tokenizer


class ImportRefused(GGUFError):
    """The file is valid but cannot be imported here (memory, types, destination)."""


def available_memory() -> int:
    """RAM, not a GPU working set: dequantizing happens on the CPU."""
    return available_ram()


def tensor_working_set(info: TensorInfo) -> int:
    """Bytes converting one tensor holds at its peak: its bytes read from the file, the
    dequantizer's per-chunk temporaries and two float32 copies at once (numpy's and MLX's, or
    numpy's and a transform's). Its output comes after numpy's copy is freed, so it fits within."""
    return info.nbytes + info.elements * (4 + 4) + CHUNK_ELEMENTS * 4 * 4


def working_set(header: GGUFHeader, bits: int) -> int:
    """Peak bytes the import holds at once: a shard not yet written (under SHARD_BYTES), the
    largest tensor being converted, and a fixed allowance for the runtime. `bits` does not change
    it: the working copies are float32 whatever is written."""
    largest = max((tensor_working_set(t) for t in header.tensors), default=0)
    return SHARD_BYTES + largest + RUNTIME_BYTES


def refusal(needed: int, have: int) -> str:
    return (
        f"Importing this model needs about {needed / 2**30:.1f} GiB of memory at once;"
        f" {this_machine()} has {have / 2**30:.1f} GiB free"
    )


def check_supported(header: GGUFHeader) -> None:
    arch = architecture_of(header)
    for t in header.tensors:
        if t.type_name not in SUPPORTED_TYPES:
            raise ImportRefused(
                f"tensor {t.name!r} has type {t.type_name}, not one of {sorted(SUPPORTED_TYPES)}"
            )
        if arch.hf_name(t.name) is None:
            raise ImportRefused(f"tensor {t.name!r} is not part of a {arch.gguf_name} model")


def dequantize(buf: Any, info: TensorInfo) -> np.ndarray:
    """One tensor as float32 in numpy order (GGUF shape reversed), dequantized chunk by chunk."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    qtype = GGMLQuantizationType(info.type)
    block, type_size = GGML_QUANT_SIZES[qtype]
    shape = tuple(reversed(info.shape))
    row_len = info.shape[0]
    rows = info.elements // row_len
    row_bytes = row_len // block * type_size
    raw = np.frombuffer(buf, dtype=np.uint8, count=info.nbytes, offset=info.offset).reshape(rows, row_bytes)
    out = np.empty((rows, row_len), dtype=np.float32)
    step = max(1, CHUNK_ELEMENTS // row_len)
    for start in range(0, rows, step):
        part = raw[start : start + step]
        if qtype == GGMLQuantizationType.F32:
            out[start : start + step] = part.view(np.float32)
        else:
            out[start : start + step] = gguf_dequantize(part, qtype).reshape(len(part), row_len)
    return out.reshape(shape)


def _quantizable(name: str, w: np.ndarray) -> bool:
    return name.endswith(".weight") and w.ndim == 2 and w.shape[-1] % GROUP_SIZE == 0 and "norm" not in name


def _repacked(
    buf: Any, info: TensorInfo, name: str, transform: Any, config: dict[str, Any]
) -> dict[str, Any]:
    """A quantized weight kept as the file's own integers, in MLX's layout (see direct.py)."""
    import mlx.core as mx

    q, scales, biases, qbits = repack(buf, info)
    if transform is not None:  # row permutations apply to packed rows, scales and biases alike
        q, scales, biases = (transform(name, a, config) for a in (q, scales, biases))
    base = name[: -len(".weight")]
    return {
        name: mx.array(np.ascontiguousarray(q)),
        f"{base}.scales": mx.array(np.ascontiguousarray(scales)).astype(mx.bfloat16),
        f"{base}.biases": mx.array(np.ascontiguousarray(biases)).astype(mx.bfloat16),
        "bits": qbits,
    }


def _storage(info: TensorInfo, kept: bool, bits: int, group: int, dense: str) -> str:
    """How one tensor was written, for the provenance file."""
    if not kept:
        return dense
    how = "the file's own integers" if can_repack(info) else f"quantized from {info.type_name}"
    return f"{bits}-bit, group {group}, {how}"


def _hash(path: Path, emit: Callable[[ImportEvent], None]) -> str:
    digest, size, done = hashlib.sha256(), path.stat().st_size, 0
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            digest.update(block)
            done += len(block)
            emit(ImportProgress("hash", done, size, "checksumming the source"))
    return digest.hexdigest()


def _tensor_bytes(f: Any, info: TensorInfo) -> tuple[bytearray, TensorInfo]:
    """One tensor's bytes read from the file (at offset 0 of the result): read, not mapped, so
    they are freed with the tensor instead of staying resident for the whole import."""
    data = bytearray()
    while len(data) < info.nbytes:  # a single read may return less (macOS stops at 2 GiB)
        block = os.pread(f.fileno(), info.nbytes - len(data), info.offset + len(data))
        if not block:
            raise GGUFError(f"tensor {info.name!r} ends past the end of the file")
        data += block
    return data, TensorInfo(info.name, info.shape, info.type, 0, info.nbytes)


def _convert(
    f: Any, info: TensorInfo, name: str, bits: int, arch: Architecture, config: dict[str, Any], dense: str
) -> tuple[dict[str, Any], bool, int, int]:
    """(evaluated output arrays, whether kept quantized, bits, group) for one tensor; its working
    copies are freed when this returns."""
    import mlx.core as mx

    buf, info = _tensor_bytes(f, info)
    keep = bits < 16 and _quantizable(name, np.empty((1, info.shape[0])))
    if keep and can_repack(info):
        parts = _repacked(buf, info, name, arch.transform, config)
        layer_bits, group = parts.pop("bits"), DIRECT_GROUP
    else:
        w = dequantize(buf, info)
        del buf
        if arch.transform is not None:
            w = arch.transform(name, w, config)
        layer_bits, group = (WIDE_BITS, DIRECT_GROUP) if info.type_name in WIDE_TYPES else (bits, GROUP_SIZE)
        arr = mx.array(w)
        del w  # one float32 copy of the tensor at a time
        if keep:  # quantized from float32, scales stored like the model's bfloat16
            q, scales, biases = mx.quantize(arr, group_size=group, bits=layer_bits)
            base = name[: -len(".weight")]
            parts = {
                name: q,
                f"{base}.scales": scales.astype(mx.bfloat16),
                f"{base}.biases": biases.astype(mx.bfloat16),
            }
        else:
            parts = {name: arr.astype(getattr(mx, dense))}
    mx.eval(*parts.values())
    return parts, keep, layer_bits, group


def import_gguf(
    source: str | Path,
    out: str | Path,
    bits: int = 4,
    *,
    emit: Callable[[ImportEvent], None] = lambda e: None,
    overwrite: bool = False,
    memory_limit: int | None = None,
) -> Path:
    """Convert `source` into an mlx-lm model folder at `out`; returns `out`.

    Raises GGUFError (or ImportRefused) with a readable message for anything it will not import.
    """
    if bits not in (4, 8, 16):
        raise ImportRefused(f"bits must be 4, 8 or 16, not {bits}")
    source, out = Path(source).resolve(), Path(out).resolve()
    started = time.monotonic()
    emit(ImportProgress("validate", 0, 1, f"checking {source.name}"))
    header = read_header(source)
    check_supported(header)
    config = model_config(header)
    arch = architecture_of(header)
    needed, have = working_set(header, bits), memory_limit or available_memory()
    if needed > have:
        raise ImportRefused(refusal(needed, have))
    if out.exists() and not overwrite:
        raise ImportRefused(f"{out} already exists")
    emit(ImportProgress("validate", 1, 1, f"{arch.gguf_name}, {len(header.tensors)} tensors"))

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        sha = _hash(source, emit)
        # bfloat16 whatever the bits, half float32's disk: the loader widens it where float32
        # runs faster (`loading.held_dtype`)
        dense = STORED_DTYPE
        writer = ShardWriter(tmp, SHARD_BYTES)
        per_layer: dict[str, dict[str, int]] = {}  # layers quantized other than the default
        storage: Counter[str] = Counter()
        total = sum(t.nbytes for t in header.tensors)
        done = 0
        with open(source, "rb") as f:
            for info in header.tensors:
                name = arch.hf_name(info.name)
                assert name is not None
                parts, keep, layer_bits, group = _convert(f, info, name, bits, arch, config, dense)
                if keep and (layer_bits, group) != (bits, GROUP_SIZE):
                    per_layer[name[: -len(".weight")]] = {"group_size": group, "bits": layer_bits}
                storage[_storage(info, keep, layer_bits, group, dense)] += 1
                writer.add(parts)
                del parts
                done += info.nbytes
                emit(ImportProgress("tensors", done, total, name))
        emit(ImportProgress("write", 0, 1, "writing safetensors"))
        writer.finish()
        del writer
        if bits < 16:
            config["quantization"] = {"group_size": GROUP_SIZE, "bits": bits, **per_layer}
            config["quantization_config"] = dict(config["quantization"])
        config["torch_dtype"] = dense
        (tmp / "config.json").write_text(json.dumps(config, indent=2))

        emit(ImportProgress("tokenizer", 0, 1, "building the tokenizer"))
        build_tokenizer(header).save(str(tmp / "tokenizer.json"))
        tok_config = tokenizer_config(header)
        (tmp / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2, ensure_ascii=False))
        types = Counter(t.type_name for t in header.tensors)
        provenance = {
            "source": str(source),
            "sha256": sha,
            "size": header.file_size,
            "name": header.get("general.name"),
            "architecture": arch.gguf_name,
            "file_type": header.get("general.file_type"),
            "tensor_types": dict(types.most_common()),
            "bits": bits,
            "group_size": GROUP_SIZE if bits < 16 else None,
            "dtype": dense,
            "storage": dict(storage.most_common()),
            "seconds": round(time.monotonic() - started, 2),
        }
        (tmp / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2))
        emit(ImportProgress("write", 1, 1, "done"))
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
