"""New models default to 16 bits where MLX computes on the CPU (no fast quantized kernels there),
to 4 bits on a GPU; an explicit choice still wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.gguf.child import ImportFinished, run_import
from app.engine.library import precision
from tests.engine.gguf.ggufbuild import tiny_llama


@pytest.mark.parametrize(("gpu", "bits"), [(True, 4), (False, 16)])
def test_default_bits_follow_the_device(monkeypatch: pytest.MonkeyPatch, gpu: bool, bits: int) -> None:
    monkeypatch.setattr(precision, "mlx_on_gpu", lambda: gpu)
    assert precision.default_bits() == bits
    assert precision.this_device().quantized_slow is not gpu
    assert f"default here {bits}" in precision.default_words()


def test_default_bits_here_match_where_mlx_runs() -> None:
    import mlx.core as mx

    on_cpu = mx.default_device().type == mx.cpu
    assert precision.default_bits() == (16 if on_cpu else 4)


@pytest.mark.parametrize(("gpu", "bits"), [(True, 4), (False, 16)])
def test_an_import_without_bits_gets_the_devices_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpu: bool, bits: int
) -> None:
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(precision, "mlx_on_gpu", lambda: gpu)
    (tmp_path / "in").mkdir()
    events = list(run_import(tiny_llama(tmp_path / "in" / "tiny.gguf")))
    assert isinstance(events[-1], ImportFinished), events[-1]
    assert Path(events[-1].path) == tmp_path / "home" / "models" / f"tiny-{bits}bit"


def test_an_explicit_bits_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(precision, "mlx_on_gpu", lambda: False)
    (tmp_path / "in").mkdir()
    events = list(run_import(tiny_llama(tmp_path / "in" / "tiny.gguf"), bits=4))
    assert Path(events[-1].path).name == "tiny-4bit"  # type: ignore[union-attr]


def test_the_warning_says_how_slow_in_plain_words() -> None:
    words = precision.slow_model_warning(4)
    assert "On this computer's processor, 4-bit models write 2 to 14 times slower than 16-bit ones" in words
    assert "expect about a word per second or less" in words
