"""A 16-bit import is stored float32 where MLX's CPU build has a fast BLAS, bfloat16 elsewhere;
4-bit imports keep what they do not quantize in bfloat16 (quantized matmuls never use BLAS)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.engine.blas import find_blas
from app.engine.gguf.child import ImportFinished, run_import
from app.engine.gguf.destination import PROVENANCE_FILE
from tests.engine.gguf.ggufbuild import tiny_llama


def imported(tmp_path: Path, bits: int) -> tuple[dict, dict]:
    source = tiny_llama(tmp_path / "tiny.gguf")
    out = tmp_path / f"tiny-{bits}bit"
    events = list(run_import(source, out, bits))
    assert isinstance(events[-1], ImportFinished), events[-1]
    provenance = json.loads((out / PROVENANCE_FILE).read_text())
    return provenance, json.loads((out / "config.json").read_text())


def stored_dtypes(folder: Path) -> set[str]:
    import mlx.core as mx

    return {str(a.dtype) for f in folder.glob("*.safetensors") for a in mx.load(str(f)).values()}


def test_without_a_fast_blas_16_bit_is_bfloat16(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECCHAT_BLAS", "none")  # read by the importer's child process
    provenance, config = imported(tmp_path, 16)
    assert provenance["dtype"] == config["torch_dtype"] == "bfloat16"
    assert stored_dtypes(tmp_path / "tiny-16bit") == {"mlx.core.bfloat16"}


def test_with_a_fast_blas_16_bit_is_float32_and_4_bit_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlx.core as mx

    if find_blas() is None or mx.default_device().type != mx.cpu:
        pytest.skip("needs MLX on the CPU with OpenBLAS installed")
    monkeypatch.delenv("SPECCHAT_BLAS", raising=False)
    provenance, config = imported(tmp_path, 16)
    assert provenance["dtype"] == config["torch_dtype"] == "float32"
    assert stored_dtypes(tmp_path / "tiny-16bit") == {"mlx.core.float32"}
    provenance, config = imported(tmp_path, 4)
    assert provenance["dtype"] == config["torch_dtype"] == "bfloat16"
    assert "mlx.core.float32" not in stored_dtypes(tmp_path / "tiny-4bit")
