"""File ▸ Add a model folder…: a folder with no model in it is said and not added."""

from __future__ import annotations

import shutil

from app.ui.library import model_folders
from tests.ui.test_main_window import make_window


def test_a_folder_with_no_model_is_said_and_not_added(qtbot, specchat_home, tmp_path, monkeypatch):
    empty = tmp_path / "Holiday photos"
    empty.mkdir()
    (empty / "beach.txt").write_text("sand", encoding="utf-8")
    w = make_window(qtbot, specchat_home)
    monkeypatch.setattr(model_folders, "ask_for_folder", lambda parent: str(empty))
    w.library.add_folder()
    qtbot.waitUntil(lambda: "No model found" in w.banner.text(), timeout=10_000)
    assert (
        f"No model found in {empty}: a model folder holds a config.json and .safetensors" in w.banner.text()
    )
    assert "or a .gguf file" in w.banner.text()
    assert model_folders.saved_folders(w.settings) == [], "a folder with no model is not remembered"
    assert w.library.sources.extra == (), "a folder with no model is not scanned"
    w.close()


def test_a_folder_with_a_model_is_added_and_scanned(qtbot, specchat_home, tmp_path, toy_models, monkeypatch):
    mine = tmp_path / "my models"
    shutil.copytree(toy_models.main, mine / "nested" / "toy-main")
    w = make_window(qtbot, specchat_home)
    qtbot.waitUntil(lambda: w.stack.currentWidget() is w.welcome, timeout=10_000)
    monkeypatch.setattr(model_folders, "ask_for_folder", lambda parent: str(mine))
    w.library.add_folder()
    qtbot.waitUntil(lambda: w.library.has_models, timeout=10_000)
    assert model_folders.saved_folders(w.settings) == [str(mine)], "the folder is remembered for next time"
    assert w.library.sources.extra == (mine,), "the folder is scanned for models now"
    assert w.banner.text() == ""
    w.library.add_folder()  # the same folder again is not listed twice
    qtbot.waitUntil(lambda: not w.background.jobs, timeout=10_000)
    assert model_folders.saved_folders(w.settings) == [str(mine)]
    w.close()
