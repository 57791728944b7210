"""Imported weights against transformers loading the same GGUF with PyTorch (test-only).

The measure is next-token argmax agreement over a few hundred positions of ordinary text: the
bfloat16 import should agree at >= 99% of positions (see the test for near-ties); the 4-bit import's agreement is reported
(and must stay reasonable). Results are appended to <cache>/reports/argmax_agreement.jsonl.
"""

from __future__ import annotations

import functools
import json
import time

import numpy as np
import pytest

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
pytestmark = [pytest.mark.real_models, pytest.mark.slow, pytest.mark.torch_oracle]


@functools.cache
def _ids(key: str) -> tuple[int, ...]:
    from app.engine.gguf.header import read_header
    from app.engine.gguf.tokenizer import build_tokenizer

    return tuple(build_tokenizer(read_header(need_gguf(key))).encode(TEXT).ids)


@functools.cache
def _reference(key: str) -> np.ndarray:
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
        return model(torch.tensor([_ids(key)])).logits[0].numpy()


def _ours(key: str, bits: int) -> np.ndarray:
    import mlx.core as mx
    from mlx_lm import load

    model, _ = load(str(imported(key, bits)))
    logits = model(mx.array([_ids(key)]))[0]
    return np.array(mx.argmax(logits, axis=-1))


def _agreement(key: str, bits: int) -> tuple[float, np.ndarray]:
    need_torch()
    started = time.monotonic()
    logits, ours = _reference(key), _ours(key, bits)
    ref = logits.argmax(-1)
    agree = float((ref == ours).mean())
    top2 = np.sort(logits, axis=-1)[:, -2:]
    gaps = (top2[:, 1] - top2[:, 0])[ref != ours]  # how close the reference itself was to a tie
    report = cache_root() / "reports"
    report.mkdir(parents=True, exist_ok=True)
    with open(report / "argmax_agreement.jsonl", "a") as f:
        row = {"model": key, "bits": bits, "positions": len(ref), "agreement": round(agree, 4),
               "mismatch_reference_gaps": [round(float(g), 3) for g in gaps],
               "seconds": round(time.monotonic() - started, 1)}
        f.write(json.dumps(row) + "\n")
    print(f"\n{key} {bits}-bit: argmax agreement {agree:.2%} over {len(ref)} positions")
    return agree, gaps


@pytest.mark.parametrize("key", KEYS)
def test_bf16_import_matches_reference(key: str) -> None:
    assert len(_ids(key)) >= 250
    agree, gaps = _agreement(key, 16)
    # The target is 99%. bfloat16 arithmetic against a float32 reference flips near-ties (SmolLM2:
    # 98.9% in bfloat16, 99.6% with the same weights in float32), so below 99% every disagreement
    # must be one where the reference's own top two logits were within 0.25 of each other.
    assert agree >= 0.99 or (agree >= 0.95 and (gaps < 0.25).all()), (agree, gaps)


@pytest.mark.parametrize("key", KEYS)
def test_4bit_import_agreement_is_reported(key: str) -> None:
    assert _agreement(key, 4)[0] >= 0.5
