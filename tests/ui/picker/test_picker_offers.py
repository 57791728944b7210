"""What the picker offers: never a model as its own draft, never a damaged folder; both are
listed greyed with the reason in plain words."""

from __future__ import annotations

import shutil
from pathlib import Path

from app.engine.library.store import Store
from app.ui.picker.picker import LOOKUP, PLAIN, PickerDialog
from tests.ui.picker.test_picker import BIG, rows, sources


def library(toy_models, root: Path) -> Path:
    """The toy pair, a second copy of the main elsewhere, and a draft whose weights are a web page."""
    shutil.copytree(toy_models.main, root / "toy-main")
    shutil.copytree(toy_models.main, root / "downloads" / "toy-main")
    shutil.copytree(toy_models.draft, root / "broken-draft")
    (root / "broken-draft" / "model.safetensors").write_bytes(b"<html>Not Found</html>" * 20)
    shutil.copytree(toy_models.draft, root / "toy-draft")
    return root


def test_a_copy_of_the_main_and_a_damaged_folder_are_never_offered(qtbot, toy_models, tmp_path):
    root = library(toy_models, tmp_path / "lib")
    dialog = PickerDialog(sources(root), usable_memory=BIG, store=Store(tmp_path / "cache.sqlite3"))
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.main_model.rowCount() == 4, timeout=30_000)
    qtbot.waitUntil(dialog.drafts_checked, timeout=30_000)
    mains = [dialog.main_model.item(i) for i in range(dialog.main_model.rowCount())]
    broken = [m for m in mains if "broken-draft" in m.text()]
    assert len(broken) == 1, "the damaged folder is listed once"
    assert not broken[0].isEnabled(), "the damaged folder cannot be chosen"
    assert (
        "damaged or unreadable: model.safetensors is not a model file SpecChat can read" in broken[0].text()
    )
    assert "header length" in broken[0].toolTip()  # the detail stays one hover away
    assert mains[-1] is broken[0]  # listed last, after every model that can be used
    offered = [(key, enabled) for key, _, enabled, _ in rows(dialog)]
    assert offered == [(PLAIN, True), (LOOKUP, True), (str(root / "toy-draft"), True)]
    assert "2 drafts hidden" in dialog.show_incompatible.text()
    dialog.show_incompatible.setChecked(True)
    greyed = {key: text for key, text, enabled, _ in rows(dialog) if not enabled}
    main = dialog.current_main().path  # the copies tie on size; either may come first
    twin = next(str(p) for p in (root / "toy-main", root / "downloads" / "toy-main") if str(p) != main)
    copy, damaged = greyed[twin], greyed[str(root / "broken-draft")]
    assert "This is another copy of toy-main: a model can't draft for itself" in copy
    assert "broken-draft is damaged or unreadable: model.safetensors is not a model file" in damaged
