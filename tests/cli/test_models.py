"""`python -m app models`: the library in words, as the picker offers it."""

from __future__ import annotations

import shutil

from app.cli import main


def test_models_lists_roles_drafts_and_plain_reasons(
    toy_models, toy_mismatched_draft, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    root = tmp_path / "lib"
    for name, src in (
        ("toy-main", toy_models.main),
        ("toy-draft", toy_models.draft),
        ("other", toy_mismatched_draft),
    ):
        shutil.copytree(src, root / name)
    assert main(["models", "--models-dir", str(root), "--no-hub", "--no-lmstudio", "--no-fetched"]) == 0
    out = capsys.readouterr().out
    first = out.split("\n\n")[0] if "\n\n" in out else out
    assert first.startswith("toy-main  [suggested: main]")
    assert f"  draft: {root / 'toy-draft'}" in out
    assert f"  hidden: {root / 'other'}: other uses a different vocabulary from toy-main" in out
    assert "toy-draft  [suggested: draft]" in out


def test_models_on_an_empty_library_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    assert (
        main(["models", "--models-dir", str(tmp_path / "none"), "--no-hub", "--no-lmstudio", "--no-fetched"])
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("No models found. Download one from the window's model picker")
