"""Shared fixtures: the toy model pair is written once per test session.

The optimized BLAS is loaded first, as the app does, so tests run MLX the way users do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.engine.blas import ensure_blas
from app.engine.measure.toy import ToyModels, write_toy_models

ensure_blas()  # before any test module imports MLX; nothing above does


@pytest.fixture(scope="session")
def toy_models(tmp_path_factory: pytest.TempPathFactory) -> ToyModels:
    """main/, draft/ and draft_random/ written with seed 0, float32."""
    return write_toy_models(tmp_path_factory.mktemp("toy") / "models", seed=0)


@pytest.fixture(scope="session")
def toy_mismatched_draft(toy_models: ToyModels, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy draft with two token ids swapped in its tokenizer: what a draft from another
    model family looks like to the compatibility check, since its ids mean other text."""
    folder = tmp_path_factory.mktemp("mismatched") / "draft"
    shutil.copytree(toy_models.draft, folder)
    spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = spec["model"]["vocab"]
    by_id = {i: text for text, i in vocab.items()}
    vocab[by_id[300]], vocab[by_id[301]] = 301, 300
    (folder / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    return folder
