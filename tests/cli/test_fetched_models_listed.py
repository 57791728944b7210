"""`python -m app fetch-models` imports into the model cache's mlx folder, which the window's
default sources list (read only), so a fetched model is offered without adding a folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.engine.gguf import fixtures
from app.engine.gguf.fixtures import ModelFixture, gguf_path, mlx_path, sha256_of
from app.engine.library.discovery import FETCHED, default_sources, scan_library
from tests.engine.gguf.ggufbuild import tiny_llama


def test_a_fetched_model_is_listed_by_the_default_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    built = tiny_llama(tmp_path / "tiny.gguf")
    fixture = ModelFixture("tiny", "tiny-llama", "0", (), built.stat().st_size, sha256_of(built))
    monkeypatch.setitem(fixtures.FIXTURES, "tiny", fixture)
    gguf_path("tiny").parent.mkdir(parents=True)
    built.rename(gguf_path("tiny"))  # already assembled: nothing to download

    assert main(["fetch-models", "--models", "tiny", "--bits", "16"]) == 0
    folder = mlx_path("tiny", 16)
    assert folder == tmp_path / "cache" / "mlx" / "tiny-llama-16bit"

    facts, _ = scan_library(default_sources())
    listed = {Path(f.path).resolve(): f for f in facts}
    assert folder.resolve() in listed
    found = listed[folder.resolve()]
    assert (found.name, found.source, found.usable) == ("tiny-llama-16bit", FETCHED, True)
