"""The picker's main list, empty, says what to do, and each way it names works from there."""

from __future__ import annotations

import re
import shutil

from PySide6.QtCore import QSettings

from app.ui.library import model_folders
from app.ui.library.empty_library import WORDS
from app.ui.picker.picker import PickerDialog
from tests.ui.picker.test_picker import sources


def _words(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def open_empty(qtbot, tmp_path) -> PickerDialog:
    root = tmp_path / "empty"
    root.mkdir()
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    dialog = PickerDialog(sources(root), settings=settings, usable_memory=2**36)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: "0 model(s)" in dialog.state_label.text(), timeout=10_000)
    return dialog


def test_the_empty_main_list_says_what_to_do(qtbot, tmp_path):
    dialog = open_empty(qtbot, tmp_path)
    assert dialog.main_model.rowCount() == 0
    assert dialog.empty_note.isVisible()
    assert _words(dialog.empty_note.text()) == WORDS
    assert WORDS == "No models yet — Download one, Import a GGUF file, or Add a model folder"
    dialog.recommended.hide()
    dialog.empty_note.linkActivated.emit("download")
    assert dialog.recommended.isVisible()


def test_add_a_model_folder_from_the_empty_list(qtbot, tmp_path, toy_models, monkeypatch):
    dialog = open_empty(qtbot, tmp_path)
    nothing, mine = tmp_path / "nothing", tmp_path / "mine"
    nothing.mkdir()
    shutil.copytree(toy_models.main, mine / "toy-main")
    said = []
    dialog.empty_note.failed.connect(said.append)
    monkeypatch.setattr(model_folders, "ask_for_folder", lambda parent: str(nothing))
    dialog.empty_note.linkActivated.emit("folder")
    qtbot.waitUntil(lambda: bool(said), timeout=10_000)
    assert said[0].startswith(f"No model found in {nothing}")
    assert dialog.empty_note.isVisible()
    moved = []
    dialog.sources_changed.connect(moved.append)
    monkeypatch.setattr(model_folders, "ask_for_folder", lambda parent: str(mine))
    dialog.empty_note.linkActivated.emit("folder")
    qtbot.waitUntil(lambda: dialog.main_model.rowCount() == 1, timeout=30_000)
    assert not dialog.empty_note.isVisible()
    assert moved, "adding a folder tells the window"
    assert moved[0].extra == (mine,), "the window is told of the added folder"
    assert dialog.sources.extra == (mine,), "the picker now lists from the added folder"
    assert model_folders.saved_folders(dialog.settings) == [str(mine)]
