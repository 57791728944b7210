"""Shared fixtures: the toy model pair is written once per test session."""

from __future__ import annotations

import pytest

from app.engine.measure.toy import ToyModels, write_toy_models


@pytest.fixture(scope="session")
def toy_models(tmp_path_factory: pytest.TempPathFactory) -> ToyModels:
    """main/, draft/ and draft_random/ written with seed 0, float32."""
    return write_toy_models(tmp_path_factory.mktemp("toy") / "models", seed=0)
