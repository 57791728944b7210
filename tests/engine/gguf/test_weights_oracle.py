"""Imported weights against transformers loading the same GGUF with PyTorch (test-only).

The measure is next-token argmax agreement over a few hundred positions of ordinary text,
against the reference's float32 logits.

- Primary check (the issue's >= 99%): the bfloat16 import's weights, exactly as written, are
  loaded with mlx-lm and then cast to float32, so the forward pass runs in float32 like the
  reference. That isolates the import's correctness (names, permutations, norm offsets, config)
  from bfloat16 arithmetic, which on its own flips the reference's near-ties: a wrong conversion
  shows up here as far more than a 1% disagreement, while bfloat16 compute noise does not. The
  reference there holds the same bfloat16-rounded values; against the float32-weights reference
  the agreement is recorded too.
- Recorded, with only a sanity floor: the same import run as it will be used, in bfloat16
  compute; and the 4-bit import, its quantized weights dequantized in MLX (exactly the values the
  quantized kernels use) and run in float32 compute, so the number measures what 4-bit storage
  costs rather than the speed of the CPU build's quantized kernels.

Every measurement is appended to <cache>/reports/argmax_agreement.jsonl.
"""

from __future__ import annotations

import functools
import json
import time

import numpy as np
import pytest

from app.engine.gguf.destination import PROVENANCE_FILE
from app.engine.gguf.fixtures import cache_root
from tests.engine.gguf.conftest import imported, need_gguf, need_torch

TEXT = """The history of computing is a story of abstractions layered on top of one another. Early
machines were programmed by rewiring panels; later, stored programs made it possible to change
behaviour by loading new instructions into memory. Assemblers gave names to those instructions,
and compilers let people describe algorithms in terms closer to mathematics than to circuitry.

def merge_sort(items):
    if len(items) <= 1:
        return items
    middle = len(items) // 2
    left = merge_sort(items[:middle])
    right = merge_sort(items[middle:])
    result = []
    while left and right:
        result.append(left.pop(0) if left[0] <= right[0] else right.pop(0))
    return result + left + right

Operating systems, in turn, hid the details of disks and terminals behind files and processes.
Networks connected those systems, and the web connected the people using them. Each layer made
the one below it easier to forget, and each brought its own failures: a bug in a compiler, a
race in a scheduler, a misconfigured router. Good engineers learn to look through the layers when
something breaks, while still relying on them when everything works as intended."""

KEYS = ("smollm2", "qwen0.5b", "gemma3")
# A reference pass plus one MLX pass takes several minutes per model on a busy 2-core CPU.
pytestmark = [pytest.mark.real_models, pytest.mark.slow, pytest.mark.torch_oracle, pytest.mark.timeout(1800)]


@functools.cache
def _ids(key: str) -> tuple[int, ...]:
    from app.engine.gguf.header import read_header
    from app.engine.gguf.tokenizer import build_tokenizer

    return tuple(build_tokenizer(read_header(need_gguf(key))).encode(TEXT).ids)


@functools.cache
def _reference(key: str, stored_precision: bool = False) -> np.ndarray:
    """transformers' float32 logits for the text, from the same GGUF.

    `stored_precision`: the reference's weights rounded to bfloat16 first, i.e. the values a
    bfloat16 import is asked to store, and Gemma's embedding scale rounded to bfloat16 the way
    mlx-lm's Gemma-3 (like the original Gemma code) computes it. Then both sides hold the same
    numbers and only the conversion itself can make them disagree."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    # transformers' own GGUF reading and name mapping, without its accelerate-only loading path.
    path = need_gguf(key)
    config = AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    model.tie_weights()
    model.eval()
    with torch.no_grad():
        if stored_precision:
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
            scale = getattr(model.model.embed_tokens, "embed_scale", None)
            if scale is not None:
                scale.copy_(scale.to(torch.bfloat16).to(torch.float32))
        return model(torch.tensor([_ids(key)])).logits[0].numpy()


def _ours(key: str, bits: int, compute: str) -> np.ndarray:
    """Argmax of the imported model's logits; `compute` is "float32" or "bfloat16"."""
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.utils import dequantize_model

    model, _ = load(str(imported(key, bits)))
    if bits < 16:
        dequantize_model(model)  # the stored 4-bit values, as the quantized kernels see them
    if compute == "float32":
        model.set_dtype(mx.float32)
    logits = model(mx.array([_ids(key)]))[0]
    return np.array(mx.argmax(logits, axis=-1))


def _agreement(key: str, bits: int, compute: str, stored_precision: bool = False) -> float:
    need_torch()
    started = time.monotonic()
    ours = _ours(key, bits, compute)
    return _record(key, f"{bits}-bit import", compute, ours, started, stored_precision)


def _record(
    key: str, weights: str, compute: str, ours: np.ndarray, started: float, stored_precision: bool = False
) -> float:
    """Agreement of `ours` (argmax per position) with the reference, printed and appended to the report."""
    logits = _reference(key, stored_precision)
    ref = logits.argmax(-1)
    agree = float((ref == ours).mean())
    top2 = np.sort(logits, axis=-1)[:, -2:]
    gaps = (top2[:, 1] - top2[:, 0])[ref != ours]  # how close the reference itself was to a tie
    rounded = [round(float(g), 3) for g in gaps]
    report = cache_root() / "reports"
    report.mkdir(parents=True, exist_ok=True)
    with open(report / "argmax_agreement.jsonl", "a") as f:
        row = {
            "model": key,
            "weights": weights,
            "compute": compute,
            "positions": len(ref),
            "reference": "bfloat16-rounded weights" if stored_precision else "float32 weights",
            "agreement": round(agree, 4),
            "mismatch_reference_gaps": rounded,
            "seconds": round(time.monotonic() - started, 1),
            "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        f.write(json.dumps(row) + "\n")
    against = "bf16-rounded reference" if stored_precision else "float32 reference"
    print(
        f"\n{key}, {weights}, {compute} compute, {against}: argmax agreement {agree:.2%} over {len(ref)} positions"
        f" (reference top-2 gaps at mismatches: {rounded})"
    )
    return agree


@pytest.mark.parametrize("key", KEYS)
def test_bf16_import_matches_reference(key: str) -> None:
    """The issue's check: >= 99% agreement, the bfloat16 weights evaluated in float32 against the
    reference holding the same bfloat16-rounded values. Measured 100% for all three.

    Against the float32-weights reference it is recorded with a looser floor: SmolLM2 99.63%,
    Qwen2.5-Coder-0.5B 100%, Gemma-3-270M 98.89%. Gemma's three misses are near-ties (top two
    logits ~0.008 apart): two flip from rounding the weights to bfloat16, the third from mlx-lm
    rounding Gemma's embedding scale sqrt(640) to bfloat16 (25.25 for 25.30), as the original
    Gemma code does and transformers' float32 path does not."""
    assert len(_ids(key)) >= 250
    assert _agreement(key, 16, "float32", stored_precision=True) >= 0.99
    assert _agreement(key, 16, "float32") >= 0.98


def _converted_float32(key: str) -> list[tuple[str, np.ndarray]]:
    """The importer's own tensors before its bfloat16 cast: same names, dequantization, transforms."""
    import mmap

    from app.engine.gguf.architectures import architecture_of, model_config
    from app.engine.gguf.convert import dequantize
    from app.engine.gguf.header import read_header

    path = need_gguf(key)
    header = read_header(path)
    arch, config = architecture_of(header), model_config(header)
    out = []
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        for info in header.tensors:
            name = arch.hf_name(info.name)
            w = dequantize(buf, info)
            out.append((name, arch.transform(name, w, config) if arch.transform else w))
    return out


@pytest.mark.parametrize("key", KEYS)
def test_conversion_is_exact_before_rounding(key: str) -> None:
    """Separates the conversion from its storage: every stored tensor is exactly the float32
    conversion rounded to the import's dtype (bfloat16, or float32 on a Linux CPU with a fast
    BLAS: convert.dense_dtype), and the float32 conversion itself, loaded into the
    imported folder's model (its config, names and transforms), agrees with the reference at
    >= 99% (measured 100% for all three)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm import load

    need_torch()
    started = time.monotonic()
    folder = imported(key, 16)
    dtype = getattr(mx, json.loads((folder / PROVENANCE_FILE).read_text()).get("dtype", "bfloat16"))
    model, _ = load(str(folder))
    stored = dict(tree_flatten(model.parameters()))
    converted = _converted_float32(key)
    assert {n for n, _ in converted} == set(stored)
    for name, w in converted:
        want = mx.array(w).astype(dtype)
        assert stored[name].dtype == dtype, f"{name} is stored in the asked type"
        assert mx.array_equal(stored[name], want).item(), f"{name} holds the converted values"
    model.set_dtype(mx.float32)
    model.load_weights([(n, mx.array(w)) for n, w in converted], strict=True)
    del converted, stored
    ours = np.array(mx.argmax(model(mx.array([_ids(key)]))[0], axis=-1))
    assert _record(key, "float32 conversion", "float32", ours, started) >= 0.99


@pytest.mark.parametrize("key", KEYS)
def test_bf16_import_in_bf16_compute_is_reported(key: str) -> None:
    """As it runs in the app. bfloat16 arithmetic flips the reference's near-ties (measured
    95.9-98.9%), so this is recorded, with a floor that only catches a broken model."""
    assert _agreement(key, 16, "bfloat16") >= 0.9


@pytest.mark.parametrize("key", KEYS)
def test_4bit_import_agreement_is_reported(key: str) -> None:
    assert _agreement(key, 4, "float32") >= 0.97  # measured 98.2-99.3% (was 66-84% when requantized)
