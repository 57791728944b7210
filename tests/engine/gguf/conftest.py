"""Real-model fixtures: the GGUFs of shared/MODELS.md, fetched by `python -m app fetch-models`.

Tests using them are marked `real_models` and skip, saying how to fetch, when a file is absent.
Tests that need the PyTorch reference (`pip install -e .[oracle]`) are marked `torch_oracle`
and run only with SPECCHAT_ORACLE=1 and torch installed.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from app.engine.gguf.fixtures import FIXTURES, gguf_path, mlx_path

MODEL_KEYS = ("smollm2", "qwen0.5b", "qwen1.5b", "gemma3")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "torch_oracle: compares against transformers + PyTorch (extra 'oracle')"
    )


def need_gguf(key: str) -> Path:
    path = gguf_path(key)
    if not path.is_file() or path.stat().st_size != FIXTURES[key].size:
        pytest.skip(
            f"{FIXTURES[key].name} is not in the model cache: run `python -m app fetch-models --models {key}`"
        )
    return path


def need_torch() -> None:
    """Oracle tests take minutes each on the CPU build: they run only when asked for."""
    if os.environ.get("SPECCHAT_ORACLE") != "1":
        pytest.skip("PyTorch oracle tests are opt-in: set SPECCHAT_ORACLE=1")
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the PyTorch oracle is not installed: pip install -e '.[oracle]'")


def imported(key: str, bits: int) -> Path:
    """The cached MLX import of a fixture, made on first use through the child-process importer."""
    out = mlx_path(key, bits)
    if (out / "config.json").is_file():
        return out
    from app.engine.gguf.child import ImportFailed, run_import

    for event in run_import(need_gguf(key), out, bits):
        if isinstance(event, ImportFailed):
            pytest.fail(f"import of {key} failed: {event.message}")
    return out
