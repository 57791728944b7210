"""Qt tests run offscreen: no display is needed."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def specchat_home(tmp_path, monkeypatch):
    """Each test gets its own app-data folder, so caches never leak between tests."""
    home = tmp_path / "specchat-home"
    monkeypatch.setenv("SPECCHAT_HOME", str(home))
    return home
