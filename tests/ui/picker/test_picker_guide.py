"""The picker guides: hidden drafts are counted with a plain reason, mains come largest first with a
suggested role, and `python -m app models --json` lists exactly what the picker offers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.cli import main as cli_main
from app.engine.library.discovery import Sources
from app.ui.picker.picker import KEY, PickerDialog

REAL = Path.home() / ".cache" / "specchat" / "mlx"
SMOL, CODER = "SmolLM2-135M-Instruct-Q4_1-4bit", "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M-4bit"


def library(toy_models, toy_mismatched_draft, root: Path) -> Path:
    """The toy pair plus a draft whose ids mean other text, as one from another family would."""
    for name, src in (
        ("toy-main", toy_models.main),
        ("toy-draft", toy_models.draft),
        ("other-draft", toy_mismatched_draft),
    ):
        shutil.copytree(src, root / name)
    return root


def open_picker(qtbot, sources: Sources, count: int) -> PickerDialog:
    dialog = PickerDialog(sources, usable_memory=64 * 2**30)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.main_model.rowCount() == count, timeout=60_000)
    qtbot.waitUntil(dialog.drafts_checked, timeout=60_000)
    return dialog


def draft_rows(dialog: PickerDialog) -> list[tuple[str, str, bool, str]]:
    m = dialog.draft_model
    return [
        (m.item(i).data(KEY), m.item(i).text(), m.item(i).isEnabled(), m.item(i).toolTip())
        for i in range(m.rowCount())
    ]


def test_hidden_drafts_are_counted_and_explained_in_plain_words(
    qtbot, toy_models, toy_mismatched_draft, tmp_path
):
    root = library(toy_models, toy_mismatched_draft, tmp_path / "lib")
    dialog = open_picker(qtbot, Sources(None, None, root, use_hub=False), 3)
    assert dialog.current_main().name == "toy-main"
    toggle = dialog.show_incompatible
    assert toggle.isVisibleTo(dialog)
    assert toggle.text() == "1 draft hidden (different vocabulary) — show"
    assert not any(r[0].endswith("other-draft") for r in draft_rows(dialog))
    toggle.setChecked(True)
    assert toggle.text() == "1 draft that can't be used (different vocabulary) — shown greyed"
    assert dialog.current_draft_key().endswith("toy-draft")  # never a greyed one
    [(_, text, enabled, tip)] = [r for r in draft_rows(dialog) if r[0].endswith("other-draft")]
    assert not enabled
    assert "other-draft uses a different vocabulary from toy-main" in text
    assert "a draft must share the main model's tokenizer" in text
    # evidence on hover
    assert "token 300 differs" not in text, "the greyed row's text skips the token detail"
    assert "token 300 differs" in tip, "the token detail is in the row's tooltip"


def test_mains_come_largest_first_with_suggested_roles(qtbot, toy_models, toy_mismatched_draft, tmp_path):
    root = library(toy_models, toy_mismatched_draft, tmp_path / "lib")
    dialog = open_picker(qtbot, Sources(None, None, root, use_hub=False), 3)
    texts = [dialog.main_model.item(i).text() for i in range(3)]
    assert texts[0].startswith("toy-main\n"), "the largest model is listed first"
    assert texts[0].endswith("suggested as main"), "the first model is suggested as the main"
    roles = {t.split("\n")[0]: t.rsplit("· ", 1)[-1] for t in texts}
    assert roles["toy-draft"] == "suggested as a draft"
    # Nothing larger shares the other draft's vocabulary, so it could only serve as a main.
    assert roles["other-draft"] == "suggested as main"


def test_models_json_lists_what_the_picker_offers(qtbot, toy_models, toy_mismatched_draft, tmp_path, capsys):
    root = library(toy_models, toy_mismatched_draft, tmp_path / "lib")
    dialog = open_picker(qtbot, Sources(None, None, root, use_hub=False), 3)
    dialog.show_incompatible.setChecked(True)
    args = ["models", "--json", "--models-dir", str(root), "--no-hub", "--no-lmstudio", "--no-fetched"]
    assert cli_main(args) == 0
    listing = json.loads(capsys.readouterr().out)["models"]
    assert [m["path"] for m in listing] == [
        dialog.main_model.item(i).data(KEY) for i in range(dialog.main_model.rowCount())
    ]
    first = listing[0]
    assert first["name"] == "toy-main", "the JSON lists toy-main first"
    assert first["suggested_role"] == "main", "the JSON suggests it as a main, as the picker does"
    assert first["family"] == "toy-main", "the JSON gives the main's family"
    assert first["parameters"] > 0, "the JSON gives a parameter count"
    assert first["context_length"], "the JSON gives a context length"
    offered = [r for r in draft_rows(dialog)[2:]]
    assert first["compatible_drafts"] == [key for key, _, enabled, _ in offered if enabled]
    assert [h["path"] for h in first["hidden_drafts"]] == [
        key for key, _, enabled, _ in offered if not enabled
    ]
    assert first["hidden_drafts"][0]["reason"] in offered[-1][1]
    assert {m["name"]: m["suggested_role"] for m in listing}["toy-draft"] == "draft"


@pytest.mark.skipif(
    not (REAL / SMOL).is_dir() or not (REAL / CODER).is_dir(), reason="real models not fetched"
)
def test_real_models_get_a_plain_reason(qtbot, tmp_path):
    sources = Sources(None, None, tmp_path / "empty", extra=(REAL,), use_hub=False)
    dialog = open_picker(qtbot, sources, len([p for p in REAL.iterdir() if (p / "config.json").is_file()]))
    assert dialog.current_main().name == CODER  # the larger model is suggested as main
    assert dialog.show_incompatible.text().endswith("hidden (different vocabulary) — show")
    dialog.show_incompatible.setChecked(True)
    [(_, text, _, tip)] = [r for r in draft_rows(dialog) if r[0].endswith(SMOL)]
    assert (
        "SmolLM2 uses a different vocabulary from Qwen2.5-Coder; a draft must share the main model's tokenizer"
        in text
    )
    assert "differ" in tip


def test_no_local_draft_offers_a_download_of_the_familys_draft(
    qtbot, toy_models, toy_mismatched_draft, tmp_path, monkeypatch
):
    from app.engine.library import roles
    from app.engine.library.recommended import RecommendedPair

    pair = RecommendedPair("Toy", "hub/Toy-5M", "hub/Toy-1M-Instruct", 10_000_000, 2_000_000)
    monkeypatch.setattr(roles, "RECOMMENDED", (pair,))
    root = tmp_path / "lib"
    shutil.copytree(toy_models.main, root / "Toy-5M")
    shutil.copytree(toy_mismatched_draft, root / "other-draft")
    dialog = open_picker(qtbot, Sources(None, None, root, use_hub=False), 2)
    dialog.show()
    assert dialog.current_main().name == "Toy-5M"
    assert "No model here can draft for this one" in dialog.suggestions.note.text()
    [button] = dialog.suggestions.buttons
    assert button.text() == "Download hub/Toy-1M-Instruct (about 2.0 MB)"
    queued: list[list[str]] = []
    monkeypatch.setattr(dialog.downloads, "enqueue", queued.append)
    button.click()
    assert queued == [["hub/Toy-1M-Instruct"]]
    assert not dialog.suggestions.measure_button.isEnabled()  # "No draft" has nothing to measure


def test_measure_now_asks_for_the_arena_with_the_chosen_pair(
    qtbot, toy_models, toy_mismatched_draft, tmp_path
):
    root = library(toy_models, toy_mismatched_draft, tmp_path / "lib")
    dialog = open_picker(qtbot, Sources(None, None, root, use_hub=False), 3)
    assert dialog.current_draft_key().endswith("toy-draft")
    with qtbot.waitSignal(dialog.measure_requested) as signal:
        dialog.suggestions.measure_button.click()
    assert signal.args == [dialog.current_main().path, dialog.current_draft_key()]
    assert not dialog.suggestions.note.isVisibleTo(dialog)
    dialog.drafts.setCurrentIndex(dialog.draft_model.index(0, 0))  # plain decoding: nothing to race
    assert not dialog.suggestions.measure_button.isEnabled()


def test_measure_now_opens_the_arena_for_the_picked_main(
    qtbot, specchat_home, toy_models, toy_mismatched_draft
):
    from tests.ui.conftest import open_window

    root = library(toy_models, toy_mismatched_draft, specchat_home / "lib")
    window = open_window(qtbot, specchat_home, root, str(root / "toy-main"), str(root / "toy-draft"))
    dialog = window.picker()
    dialog.show()
    qtbot.waitUntil(lambda: dialog.main_model.rowCount() == 3, timeout=60_000)
    [row] = [i for i in range(3) if dialog.main_model.item(i).data(KEY).endswith("toy-draft")]
    dialog.mains.setCurrentIndex(dialog.main_model.index(row, 0))  # not the loaded main
    qtbot.waitUntil(dialog.drafts_checked, timeout=60_000)
    assert dialog.current_draft_key().endswith("toy-main")
    dialog.suggestions.measure_button.click()
    assert not dialog.isVisible()
    assert window.arena is not None, "measuring drafts opens the arena"
    assert window.arena.isVisible(), "the arena is shown"
    qtbot.waitUntil(lambda: window.arena.current_main() == str(root / "toy-draft"), timeout=60_000)
    window.close()
