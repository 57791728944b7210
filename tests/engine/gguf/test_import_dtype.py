"""A 16-bit import is stored bfloat16, half float32's disk, and widened to float32 when loaded
where MLX's CPU build has a fast BLAS (float32 products go to it); 4-bit imports keep what they
do not quantize in bfloat16 and are never widened (quantized matmuls never use BLAS)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def loaded_dtypes(folder: Path) -> set[str]:
    from mlx.utils import tree_flatten

    from app.engine.decoding.loading import load_model

    model = load_model(folder).model
    return {str(p.dtype) for _, p in tree_flatten(model.parameters())}


@pytest.mark.parametrize("fastest", ["float32", "bfloat16"])
def test_16_bit_is_stored_bfloat16_and_widened_at_load_only_where_that_runs_faster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fastest: str
) -> None:
    """What runs fastest depends on the BLAS found at start-up (once per process), so the loader
    is told here; the importer, a child process, stores bfloat16 whatever it finds."""
    from app.engine.decoding import loading

    monkeypatch.delenv("SPECCHAT_BLAS", raising=False)
    provenance, config = imported(tmp_path, 16)
    assert provenance["dtype"] == config["torch_dtype"] == "bfloat16", "half float32's disk"
    assert stored_dtypes(tmp_path / "tiny-16bit") == {"mlx.core.bfloat16"}
    monkeypatch.setattr(loading, "held_dtype", lambda: fastest)
    assert loaded_dtypes(tmp_path / "tiny-16bit") == {f"mlx.core.{fastest}"}, "held as it computes fastest"


def test_4_bit_keeps_what_it_does_not_quantize_in_bfloat16(tmp_path: Path) -> None:
    provenance, config = imported(tmp_path, 4)
    assert provenance["dtype"] == config["torch_dtype"] == "bfloat16"
    assert "mlx.core.float32" not in stored_dtypes(tmp_path / "tiny-4bit")
    assert "mlx.core.float32" not in loaded_dtypes(tmp_path / "tiny-4bit"), "a quantized model is not widened"
