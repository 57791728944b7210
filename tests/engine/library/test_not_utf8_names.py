"""A model folder or GGUF file whose name is not UTF-8 is skipped by the library scan, with its
name in the log, instead of stopping the scan (and with it the window's model list)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from app.engine.library.discovery import Sources, scan_library
from app.engine.library.paths import is_utf8


def test_a_folder_named_in_bytes_that_are_not_utf8_is_skipped_and_named(
    toy_models, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    user = tmp_path / "user"
    shutil.copytree(toy_models.main, user / "fine")
    odd = Path(os.fsdecode(os.fsencode(user) + b"/caf\xe9"))
    shutil.copytree(toy_models.main, odd)
    (user / "sub").mkdir()
    Path(os.fsdecode(os.fsencode(user) + b"/sub/model-\xff.gguf")).write_bytes(b"GGUF")
    sources = Sources(hub_cache=None, lmstudio=None, specchat=tmp_path / "own", extra=(user,), use_hub=False)

    with caplog.at_level(logging.WARNING, logger="app.engine.library.discovery"):
        facts, ggufs = scan_library(sources)

    assert [f.name for f in facts] == ["fine"], "only the folder with a UTF-8 name is listed"
    assert facts[0].usable, "it is usable"
    assert ggufs == []
    logged = caplog.text
    assert "caf\\xe9: its name is not UTF-8" in logged and "model-\\xff.gguf" in logged


def test_is_utf8() -> None:
    assert is_utf8("café") and is_utf8(Path("/tmp/x"))
    assert not is_utf8(os.fsdecode(b"/tmp/caf\xe9"))
