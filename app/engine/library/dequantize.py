"""An unquantized copy of a quantized MLX model folder, made in-process (run it through
`unquantized_copy.make_copy` from the app).

Where MLX computes on the CPU a quantized model is several times slower than an unquantized one
(`precision.py`), so the window offers this copy in one click. Each quantized weight is expanded
with `mx.dequantize` (what the quantized kernels compute, so the copy answers as the original
does, up to rounding) and stored as bfloat16 (`precision.STORED_DTYPE`: the loader widens it
where float32 runs faster); the other float tensors take the same dtype, and the tokenizer and every other file are copied as they are.
Everything is written to a hidden temporary folder renamed into place only at the end, in shards
written as they fill, so memory holds one shard and one tensor, not the model.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.library.paths import models_dir
from app.engine.library.precision import UNQUANTIZED, dtype_bytes

COPY_FILE = "specchat_copy.json"  # what the copy was made from, so it is found again
INDEX_FILE = "model.safetensors.index.json"
SHARD_BYTES = 1 << 30
NOT_COPIED = {"config.json", INDEX_FILE, COPY_FILE, "specchat_source.json"}
_BITS_SUFFIX = re.compile(r"[-_.]?(\d{1,2})[-_]?bits?$", re.IGNORECASE)


class CopyRefused(Exception):
    """The copy cannot be made (not quantized, no room on disk): the message says why."""


@dataclass(frozen=True, slots=True)
class CopyProgress:
    """Bytes of the copy written so far, of `total`."""

    done: int
    total: int


@dataclass(frozen=True, slots=True)
class CopyFinished:
    """The copy is complete and in place; `existing`: an earlier copy of the same model was."""

    path: str
    seconds: float
    existing: bool = False


@dataclass(frozen=True, slots=True)
class CopyFailed:
    """`kind`: refused, cancelled, crashed or error; nothing was left in the models folder."""

    message: str
    kind: str = "error"


CopyEvent = CopyProgress | CopyFinished | CopyFailed


def quantization(config: dict[str, Any]) -> dict[str, Any] | None:
    quant = config.get("quantization") or config.get("quantization_config")
    return quant if isinstance(quant, dict) and quant.get("bits") else None


def read_config(folder: Path) -> dict[str, Any]:
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        raise CopyRefused(f"{folder / 'config.json'} is not a model configuration")
    return config


def copy_name(label: str) -> str:
    """The copy's folder name: the model's name with its bits replaced ("Qwen-4bit" ->
    "Qwen-16bit"); a hub model's name is the last part of its repo id."""
    stem = label.rstrip("/").split("/")[-1]
    return f"{_BITS_SUFFIX.sub('', stem) or stem}-{UNQUANTIZED}bit"


def copied_from(folder: Path) -> str | None:
    try:
        record = json.loads((folder / COPY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    source = record.get("source") if isinstance(record, dict) else None
    return source if isinstance(source, str) and (folder / "config.json").is_file() else None


def copy_destination(source: Path, label: str, root: Path | None = None) -> tuple[Path, bool]:
    """(folder, already made): an earlier copy of `source`, else the first free name."""
    first = (root or models_dir()) / copy_name(label)
    for n in range(1, 100):
        folder = first if n == 1 else first.with_name(f"{first.name}-{n}")
        if copied_from(folder) == str(source.resolve()):
            return folder, True
        if not folder.exists():
            return folder, False
    raise CopyRefused(f"{first.parent} already holds a hundred folders named {first.name}")


def _layer(quant: dict[str, Any], module: str) -> tuple[int, int, str]:
    """(group size, bits, mode) of one quantized layer: its own entry, else the model's."""
    own = quant.get(module)
    spec = own if isinstance(own, dict) else quant
    mode = str(spec.get("mode", quant.get("mode", "affine")))
    return int(spec.get("group_size", quant.get("group_size", 64))), int(spec["bits"]), mode


def _planned(weights: dict[str, Any], quant: dict[str, Any], dtype: str) -> tuple[list[str], int]:
    """(tensor names to write, in order; bytes the copy will take)."""
    names, total = [], 0
    for name in sorted(weights):
        base = name.rsplit(".", 1)[0]
        if name.endswith((".scales", ".biases")) and f"{base}.weight" in weights:
            continue  # folded into its weight
        array, packed = weights[name], _packed(name, weights)
        count = array.size * 32 // _layer(quant, base)[1] if packed else array.size
        names.append(name)
        total += count * (dtype_bytes(dtype) if packed or _floating(array) else array.itemsize)
    return names, total


def _packed(name: str, weights: dict[str, Any]) -> bool:
    """Whether `name` is a quantized weight (a layer's bias beside it is not)."""
    return name.endswith(".weight") and f"{name[: -len('.weight')]}.scales" in weights


def _floating(array: Any) -> bool:
    import mlx.core as mx

    return bool(mx.issubdtype(array.dtype, mx.floating))


def _converted(name: str, weights: dict[str, Any], quant: dict[str, Any], dtype: str) -> Any:
    import mlx.core as mx

    base, target = name.rsplit(".", 1)[0], getattr(mx, dtype)
    array = weights[name]
    if _packed(name, weights):
        group, bits, mode = _layer(quant, base)
        scales, biases = weights[f"{base}.scales"], weights.get(f"{base}.biases")
        return mx.dequantize(array, scales, biases, group_size=group, bits=bits, mode=mode).astype(target)
    return array.astype(target) if _floating(array) else array


def _write_shards(
    folder: Path,
    names: list[str],
    convert: Callable[[str], Any],
    total: int,
    emit: Callable[[CopyEvent], None],
) -> None:
    """Convert tensor by tensor, writing a shard each time one reaches SHARD_BYTES; then name
    the shards `model-i-of-n` and write the index."""
    import mlx.core as mx

    written: list[tuple[Path, list[str]]] = []
    pending: dict[str, Any] = {}
    pending_bytes = done = 0

    def flush() -> None:
        nonlocal pending, pending_bytes
        if pending:
            path = folder / f"part-{len(written) + 1:05d}.safetensors"
            mx.save_safetensors(str(path), pending, metadata={"format": "mlx"})
            written.append((path, list(pending)))
            pending, pending_bytes = {}, 0
            mx.clear_cache()

    for name in names:
        array = convert(name)
        mx.eval(array)
        pending[name] = array
        pending_bytes += array.nbytes
        done += array.nbytes
        if pending_bytes >= SHARD_BYTES:
            flush()
        emit(CopyProgress(min(done, total), total))
    flush()
    weight_map: dict[str, str] = {}
    for i, (path, tensors) in enumerate(written):
        final = f"model-{i + 1:05d}-of-{len(written):05d}.safetensors"
        os.replace(path, folder / final)
        weight_map.update(dict.fromkeys(tensors, final))
    index = {"metadata": {"format": "mlx"}, "weight_map": dict(sorted(weight_map.items()))}
    (folder / INDEX_FILE).write_text(json.dumps(index, indent=2))


def dequantize_folder(
    source: str | Path, out: str | Path, dtype: str, emit: Callable[[CopyEvent], None] = lambda e: None
) -> Path:
    """Write an unquantized copy of the MLX model folder `source` to `out` (which must not
    exist), its weights in `dtype`; returns `out`. Raises CopyRefused, with words, for a model
    that is not quantized or a copy the disk has no room for."""
    import mlx.core as mx

    source, out = Path(source).resolve(), Path(out).resolve()
    started = time.monotonic()
    config = read_config(source)
    quant = quantization(config)
    if quant is None:
        raise CopyRefused(f"{source.name} is not quantized: it needs no copy")
    if out.exists():
        raise CopyRefused(f"{out} already exists")
    weights: dict[str, Any] = {}
    for file in sorted(source.glob("*.safetensors")):
        loaded = mx.load(str(file))  # read lazily: a tensor's bytes when it is converted
        assert isinstance(loaded, dict)  # a .safetensors file always loads as a dict
        weights.update(loaded)
    names, total = _planned(weights, quant, dtype)
    out.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(out.parent).free
    if total > free:
        raise CopyRefused(
            f"the copy needs about {total / 1e9:.1f} GB of disk; {out.parent} has {free / 1e9:.1f} GB free"
        )
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        emit(CopyProgress(0, total))
        _write_shards(tmp, names, lambda name: _converted(name, weights, quant, dtype), total, emit)
        for file in sorted(source.iterdir()):
            if file.is_file() and not file.name.startswith(".") and file.suffix != ".safetensors":
                if file.name not in NOT_COPIED:
                    shutil.copyfile(file, tmp / file.name)  # a hub snapshot's links become files
        for key in ("quantization", "quantization_config"):
            config.pop(key, None)
        config["torch_dtype"] = dtype
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        record = {
            "source": str(source),
            "from_bits": quant["bits"],
            "dtype": dtype,
            "seconds": round(time.monotonic() - started, 2),
        }
        (tmp / COPY_FILE).write_text(json.dumps(record, indent=2))
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
