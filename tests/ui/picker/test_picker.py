"""The pair picker, offscreen: ranking, greyed incompatible drafts, memory refusal, downloads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from PySide6.QtWidgets import QMessageBox

from app.engine.library.discovery import Sources
from app.ui.picker.picker import KEY, LOOKUP, PLAIN, PickerDialog
from tests.engine.library.hubserver import HubState, LocalHub

BIG = 64 * 2**30


def build_library(toy_models, root: Path) -> Path:
    """main, a compatible draft, and a draft whose tokenizer renames one special token."""
    for name, src in (
        ("toy-main", toy_models.main),
        ("toy-draft", toy_models.draft),
        ("toy-altered", toy_models.draft),
    ):
        shutil.copytree(src, root / name)
    tok_path = root / "toy-altered" / "tokenizer.json"
    tok = json.loads(tok_path.read_text(encoding="utf-8"))
    tok["added_tokens"][2]["content"] = "<|im_stop|>"
    tok_path.write_text(json.dumps(tok), encoding="utf-8")
    return root


def sources(root: Path) -> Sources:
    return Sources(hub_cache=None, lmstudio=None, specchat=root, use_hub=False)


def rows(dialog: PickerDialog) -> list[tuple[str, str, bool, str]]:
    m = dialog.draft_model
    return [
        (m.item(i).data(KEY), m.item(i).text(), m.item(i).isEnabled(), m.item(i).toolTip())
        for i in range(m.rowCount())
    ]


def open_picker(qtbot, root: Path, **kwargs) -> PickerDialog:
    dialog = PickerDialog(sources(root), **kwargs)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.main_model.rowCount() == 3, timeout=30_000)
    qtbot.waitUntil(
        lambda: dialog.current_main() is not None and dialog.current_main().path in dialog.verdicts,
        timeout=30_000,
    )
    return dialog


def test_drafts_ranked_and_incompatible_greyed_with_reason(qtbot, toy_models, tmp_path):
    root = build_library(toy_models, tmp_path / "lib")
    dialog = open_picker(qtbot, root, usable_memory=BIG)
    assert dialog.current_main().name == "toy-main"  # the largest model comes first
    keys = [r[0] for r in rows(dialog)]
    assert keys[:2] == [PLAIN, LOOKUP], "plain and lookup are offered first"
    assert keys[2].endswith("toy-draft"), "the compatible draft comes next"
    assert len(keys) == 3, "the altered draft is hidden at first"
    dialog.show_incompatible.setChecked(True)
    altered = [r for r in rows(dialog) if r[0].endswith("toy-altered")]
    assert len(altered) == 1
    _, text, enabled, tip = altered[0]
    assert not enabled
    assert "toy-altered uses a different vocabulary from toy-main" in text
    assert "token 2 differs: '<|im_end|>' in the main, '<|im_stop|>' in the draft" in tip
    assert "token 2 differs" in tip
    dialog.resize(1000, 720)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.grab().save("/tmp/picker.png")


def test_pair_that_does_not_fit_needs_confirmation(qtbot, toy_models, tmp_path, monkeypatch):
    root = build_library(toy_models, tmp_path / "lib")
    dialog = open_picker(qtbot, root, usable_memory=1)
    assert "Won't fit" in dialog.fit_label.text() and "GiB" in dialog.fit_label.text(), (
        "a pair too big for memory says it won't fit"
    )
    answers, asked = [QMessageBox.StandardButton.No, QMessageBox.StandardButton.Yes], []
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: (asked.append(a[2]), answers.pop(0))[1])
    dialog.use_button.click()
    assert dialog.picked is None, "the first No leaves the pair unpicked"
    assert "Load it anyway?" in asked[0], "the user is asked whether to load it anyway"
    dialog.use_button.click()
    assert dialog.picked is not None, "a Yes picks the pair"
    assert dialog.picked.mode == "model", "the main is picked as a model, not plain or lookup"
    assert dialog.picked.draft.endswith("toy-draft"), "the compatible draft comes with it"
    assert dialog.picked.context == 4096, "the chosen context length comes with it"


def test_plain_and_lookup_are_always_offered(qtbot, toy_models, tmp_path):
    root = build_library(toy_models, tmp_path / "lib")
    dialog = open_picker(qtbot, root, usable_memory=BIG)
    dialog.drafts.setCurrentIndex(dialog.draft_model.index(1, 0))
    dialog.use_button.click()
    assert dialog.picked.mode == LOOKUP, "the second row picks lookup"
    assert dialog.picked.draft is None, "lookup needs no draft model"


def test_first_run_shows_recommended_pairs_and_downloads_with_progress(qtbot, toy_models, tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    files = {p.name: p.read_bytes() for p in Path(toy_models.draft).iterdir()}
    with LocalHub(HubState({"org/toy": files})) as hub:
        dialog = PickerDialog(sources(root), endpoint=hub.endpoint, download_root=root, usable_memory=BIG)
        qtbot.addWidget(dialog)
        qtbot.waitUntil(lambda: "0 model(s)" in dialog.state_label.text(), timeout=10_000)
        assert not dialog.recommended.isHidden()
        assert "Download (about" in dialog.recommended.findChildren(type(dialog.use_button))[0].text()
        dialog.downloads.repo.setText("org/toy")
        with qtbot.waitSignal(dialog.library_changed, timeout=30_000):
            dialog.downloads.start_button.click()
            qtbot.waitSignal(dialog.downloads.downloaded, timeout=30_000)
        qtbot.waitUntil(lambda: dialog.main_model.rowCount() == 1, timeout=10_000)
    assert dialog.downloads.bar.value() == 1000
    assert "Downloaded to" in dialog.downloads.status.text()
    assert dialog.recommended.isHidden()
    assert (root / "org" / "toy" / "config.json").is_file()


def test_failed_download_is_reported(qtbot, tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    with LocalHub(HubState({})) as hub:
        dialog = PickerDialog(sources(root), endpoint=hub.endpoint, download_root=root, usable_memory=BIG)
        qtbot.addWidget(dialog)
        dialog.downloads.repo.setText("org/missing")
        dialog.downloads.start_button.click()
        qtbot.waitUntil(lambda: dialog.downloads.status.text().startswith("Failed"), timeout=30_000)
    assert not (root / "org" / "missing").exists()


def test_a_damaged_download_is_checked_then_refused_with_the_file_named(
    qtbot, toy_models, tmp_path, monkeypatch
):
    root = tmp_path / "empty"
    root.mkdir()
    files = {p.name: p.read_bytes() for p in Path(toy_models.draft).iterdir()}
    seen: list[str] = []
    with LocalHub(HubState({"org/toy": files}, faults={"model.safetensors": "flip"})) as hub:
        dialog = PickerDialog(sources(root), endpoint=hub.endpoint, download_root=root, usable_memory=BIG)
        qtbot.addWidget(dialog)
        shown = dialog.downloads.show_progress
        monkeypatch.setattr(
            dialog.downloads,
            "show_progress",
            lambda p: (shown(p), seen.append(dialog.downloads.status.text())),
        )
        dialog.downloads.repo.setText("org/toy")
        dialog.downloads.start_button.click()
        qtbot.waitUntil(lambda: "Failed" in dialog.downloads.status.text(), timeout=30_000)
    assert any("Checking files…" in text for text in seen)
    assert "model.safetensors is damaged" in dialog.downloads.status.text()
    assert not (root / "org" / "toy").exists()


def test_gguf_files_found_are_offered_for_import(qtbot, toy_models, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QInputDialog

    root = build_library(toy_models, tmp_path / "lib")
    (root / "downloads").mkdir()
    gguf = root / "downloads" / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    dialog = open_picker(qtbot, root, usable_memory=BIG)
    assert dialog.ggufs == [str(gguf)], "the GGUF file in the library is found"
    assert not dialog.import_button.isHidden(), "the import button is shown for it"
    assert "1 GGUF file(s) can be imported" in dialog.state_label.text()
    offered: list[list[str]] = []

    def choose(parent, title, label, items, *args):
        offered.append(list(items))
        return items[0], True

    monkeypatch.setattr(QInputDialog, "getItem", staticmethod(choose))
    with qtbot.waitSignal(dialog.import_requested, timeout=5000) as signal:
        dialog.import_button.click()
    assert offered == [[str(gguf)]], "the user is offered the GGUF file found"
    assert signal.args == [str(gguf)], "the chosen file is asked to be imported"
