"""Shared fixtures: the toy model pair is written once per test session.

The optimized BLAS is loaded first, as the app does, so tests run MLX the way users do.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from pytestqt.qtbot import QtBot

from app.engine.blas import ensure_blas
from app.engine.measure.toy import ToyModels, write_toy_models

# The suite runs one worker per core: OpenBLAS's own threads in each would only contend for the
# same cores (and spin in the kernel while they wait), which made the suite a sixth slower. Set
# before OpenBLAS is loaded, and inherited by the commands the tests start.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ensure_blas()  # before any test module imports MLX; nothing above does

# A test's wait for the window is a deadline for failing, never a measure of speed: on a machine
# busy with other work, a load or an answer the tests wait 5 s for can take 20. Every wait gets
# at least this long; a test that passes ends its wait as soon as the condition holds.
MIN_WAIT_MS = 60_000
_wait_until, _wait_signal = QtBot.waitUntil, QtBot.waitSignal


def _patient_wait_until(self: QtBot, callback: Callable[[], bool | None], *, timeout: int = 5000) -> None:
    _wait_until(self, callback, timeout=max(timeout, MIN_WAIT_MS))


def _patient_wait_signal(self: QtBot, signal: Any = None, *, timeout: int = 5000, **kwargs: Any) -> Any:
    return _wait_signal(self, signal, timeout=max(timeout, MIN_WAIT_MS), **kwargs)


QtBot.waitUntil = _patient_wait_until  # type: ignore[method-assign]
QtBot.waitSignal = _patient_wait_signal  # type: ignore[method-assign]

# Property tests draw the same examples every run (a CI run never meets a new one by chance), with
# no per-example deadline (a busy machine is not a failure); `pytest -m heavy` runs more of some.
settings.register_profile("specchat", derandomize=True, deadline=None)
settings.load_profile("specchat")


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
