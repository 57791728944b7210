"""A quantized model chosen where MLX computes on the CPU is warned about in plain words, and one
click makes a 16-bit copy that joins the library and is selected; on a GPU nothing is said."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.engine.library import precision
from app.engine.library.discovery import Sources
from app.engine.library.paths import models_dir
from app.ui.picker.picker import KEY, PickerDialog, describe
from app.ui.picker.precision_notice import select_path
from tests.engine.library.test_unquantized_copy import quantize

BIG = 64 * 2**30
WARNING = "On this computer's processor, 4-bit models write 2 to 14 times slower than 16-bit ones"


def open_picker(qtbot, library: Path) -> PickerDialog:
    """The picker over a folder of other models, with SpecChat's own folder where copies land."""
    dialog = PickerDialog(
        Sources(None, None, models_dir(), extra=(library,), use_hub=False), usable_memory=BIG
    )
    qtbot.addWidget(dialog)
    dialog.resize(1000, 720)
    dialog.show()
    qtbot.waitExposed(dialog)
    qtbot.waitUntil(lambda: dialog.current_main() is not None and dialog.drafts_checked(), timeout=60_000)
    return dialog


def listed(dialog: PickerDialog) -> list[str]:
    return sorted(Path(dialog.main_model.item(r).data(KEY)).name for r in range(dialog.main_model.rowCount()))


def test_a_4_bit_main_on_the_cpu_is_warned_and_copied_at_16_bits(qtbot, toy_models, tmp_path, monkeypatch):
    monkeypatch.setattr(precision, "mlx_on_gpu", lambda: False)
    quantize(toy_models.main, tmp_path / "other-app" / "toy-main-4bit")
    dialog = open_picker(qtbot, tmp_path / "other-app")
    notice = dialog.main_precision
    qtbot.waitUntil(notice.copy_button.isVisible, timeout=30_000)
    assert WARNING in notice.text.text(), "a 4-bit main on the CPU shows the warning"
    assert "expect about a word per second or less" in notice.text.text(), (
        "the warning says how slow it will be"
    )
    assert notice.copy_button.text() == "Make a 16-bit copy"

    notice.copy_button.click()
    qtbot.waitUntil(lambda: dialog.current_main().name == "toy-main-16bit", timeout=120_000)
    copy = dialog.current_main()
    assert Path(copy.path).parent == models_dir()  # in SpecChat's own folder, not the other app's
    assert copy.bits is not None, "the copy's precision is known"
    assert copy.bits >= 16, "the copy is at least 16-bit"
    assert f"{copy.bits}-bit" in describe(copy), "the picker describes the copy's bits"
    assert listed(dialog) == ["toy-main-16bit", "toy-main-4bit"]
    qtbot.waitUntil(lambda: not notice.isVisible(), timeout=10_000)  # the copy needs no warning


def test_a_4_bit_draft_is_copied_and_chosen_beside_the_same_main(qtbot, toy_models, tmp_path, monkeypatch):
    monkeypatch.setattr(precision, "mlx_on_gpu", lambda: False)
    library = tmp_path / "other-app"
    quantize(toy_models.main, library / "toy-main-4bit")
    quantize(toy_models.draft, library / "toy-draft-4bit")
    dialog = open_picker(qtbot, library)
    main = dialog.current_main().path
    assert dialog.current_draft_key().endswith("toy-draft-4bit")
    qtbot.waitUntil(dialog.draft_precision.copy_button.isVisible, timeout=30_000)
    assert WARNING in dialog.draft_precision.text.text()

    dialog.draft_precision.copy_button.click()
    qtbot.waitUntil(lambda: (dialog.current_draft_key() or "").endswith("toy-draft-16bit"), timeout=120_000)
    assert dialog.current_main().path == main


@pytest.mark.parametrize("quantized", [True, False])
def test_nothing_is_said_on_a_gpu_or_of_an_unquantized_model(
    qtbot, toy_models, tmp_path, monkeypatch, quantized
):
    monkeypatch.setattr(precision, "mlx_on_gpu", lambda: quantized)  # a GPU when the model is quantized
    if quantized:
        quantize(toy_models.main, tmp_path / "other-app" / "toy-main-4bit")
    else:
        shutil.copytree(toy_models.main, tmp_path / "other-app" / "toy-main")
    dialog = open_picker(qtbot, tmp_path / "other-app")
    qtbot.waitUntil(lambda: dialog.main_precision.device is not None, timeout=30_000)
    assert not dialog.main_precision.isVisible(), "no warning under the main when it runs well"
    assert not dialog.draft_precision.isVisible(), "no warning under the draft when it runs well"


def test_in_the_window_the_copy_stays_selected_over_the_loaded_main(qtbot, toy_models, tmp_path, monkeypatch):
    """The window keeps its loaded main selected across the picker's rescans; a copy just made
    replaces it there."""
    from app.devtools.fake_engine import FakeEngine
    from app.ui.main_window import MainWindow

    monkeypatch.setattr(precision, "mlx_on_gpu", lambda: False)
    library = tmp_path / "other-app"
    quantize(toy_models.main, library / "toy-main-4bit")
    shutil.copytree(toy_models.draft, library / "toy-draft")
    w = MainWindow(
        engine_factory=lambda emit: FakeEngine(emit),
        sources=Sources(None, None, models_dir(), extra=(library,), use_hub=False),
        restore_pair=False,
    )
    qtbot.addWidget(w)
    dialog = w.picker()
    w.new_models.prefer = str(library / "toy-draft")  # as if the draft were the loaded main
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.current_main() is not None, timeout=30_000)
    qtbot.waitUntil(lambda: dialog.current_main().name == "toy-draft", timeout=10_000)
    dialog.mains.setCurrentIndex(dialog.main_model.index(0, 0))
    assert dialog.current_main().name == "toy-main-4bit"
    qtbot.waitUntil(dialog.main_precision.copy_button.isVisible, timeout=30_000)
    dialog.main_precision.copy_button.click()
    qtbot.waitUntil(lambda: len(listed(dialog)) == 3, timeout=120_000)
    qtbot.waitUntil(lambda: dialog.current_main().name == "toy-main-16bit", timeout=10_000)


def test_a_model_the_library_holds_unquantized_is_not_copied_again_nor_its_own_draft(
    qtbot, toy_models, tmp_path, monkeypatch
):
    monkeypatch.setattr(precision, "mlx_on_gpu", lambda: False)
    library = tmp_path / "other-app"
    shutil.copytree(toy_models.main, library / "toy-main")
    quantize(toy_models.main, library / "toy-main-4bit")
    dialog = open_picker(qtbot, library)
    assert select_path(dialog.mains, dialog.main_model, str(library / "toy-main-4bit"))
    qtbot.waitUntil(dialog.drafts_checked, timeout=60_000)
    compatible = [
        Path(str(dialog.draft_model.item(r).data(KEY))).name
        for r in range(dialog.draft_model.rowCount())
        if dialog.draft_model.item(r).isEnabled() and dialog.draft_model.item(r).data(KEY)
    ]
    assert "toy-main" not in compatible, "the main at another precision is never offered as its draft"
    notice = dialog.main_precision
    qtbot.waitUntil(notice.copy_button.isVisible, timeout=30_000)
    assert "already has it unquantized: toy-main" in notice.text.text()
    assert notice.copy_button.text() == "Use toy-main", "the copy the library holds is offered instead"
    notice.copy_button.click()
    qtbot.waitUntil(lambda: dialog.current_main().name == "toy-main", timeout=30_000)
    assert not (models_dir() / "toy-main-16bit").exists(), "no second copy was made"
