"""A model that has just arrived in the library (a download, an import from the picker) is the one
selected as the main, even when a larger model would otherwise be offered first."""

from __future__ import annotations

import shutil
from pathlib import Path

from app.devtools.fake_engine import FakeEngine
from app.engine.library.discovery import Sources
from app.engine.library.paths import models_dir
from app.engine.library.precision import default_bits
from app.ui.main_window import MainWindow
from tests.engine.gguf.ggufbuild import tiny_llama
from tests.engine.library.hubserver import HubState, LocalHub


def window_over_library(qtbot, toy_models) -> MainWindow:
    """A window whose library already holds the toy main, the largest model it will see."""
    shutil.copytree(toy_models.main, models_dir() / "toy-main")
    w = MainWindow(
        engine_factory=lambda emit: FakeEngine(emit),
        sources=Sources(None, None, models_dir(), use_hub=False),
        restore_pair=False,
    )
    qtbot.addWidget(w)
    return w


def main_name(dialog) -> str | None:
    main = dialog.current_main()
    return Path(main.path).name if main is not None else None


def test_a_downloaded_model_comes_selected_as_the_main(qtbot, toy_models):
    w = window_over_library(qtbot, toy_models)
    files = {p.name: p.read_bytes() for p in Path(toy_models.draft).iterdir()}
    with LocalHub(HubState({"org/toy": files})) as hub:
        dialog = w.picker()
        qtbot.addWidget(dialog)
        dialog.downloads.endpoint = hub.endpoint
        qtbot.waitUntil(lambda: main_name(dialog) == "toy-main", timeout=30_000)
        dialog.downloads.repo.setText("org/toy")
        dialog.downloads.start_button.click()
        qtbot.waitUntil(lambda: dialog.main_model.rowCount() == 2, timeout=30_000)
    assert (models_dir() / "org" / "toy" / "config.json").is_file()  # in the library's folder
    qtbot.waitUntil(lambda: main_name(dialog) == "toy", timeout=10_000)


def test_an_import_from_the_open_picker_is_selected_there(qtbot, toy_models, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "model-cache"))
    w = window_over_library(qtbot, toy_models)
    dialog = w.picker()
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: main_name(dialog) == "toy-main", timeout=30_000)
    (tmp_path / "in").mkdir()
    dialog.import_requested.emit(str(tiny_llama(tmp_path / "in" / "tiny.gguf")))
    qtbot.waitUntil(lambda: main_name(dialog) == f"tiny-{default_bits()}bit", timeout=120_000)
    # the user picks the pair
    assert w.controller.load_request is None, "an import does not start loading by itself"
    assert w.controller.pair is None, "no pair is loaded until the user picks one"
