"""The model folders a user adds (File ▸ Add a model folder…, or the picker's link): a folder is
kept only once a model is found in it, so a wrong choice is said at once instead of adding a folder
that never shows anything.

The folder is walked off the GUI thread (a chosen folder may be large); the caller's background
tasks run the check and hand the outcome back.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QFileDialog, QWidget

from app.engine.library.discovery import USER, Sources, folder_models

KEY = "folders"


def no_model_found(folder: str | Path) -> str:
    return (
        f"No model found in {folder}: a model folder holds a config.json and .safetensors files, "
        "or a .gguf file. The folder was not added."
    )


def holds_models(folder: str | Path) -> bool:
    """Whether a model folder or a GGUF file is anywhere the library scan would look."""
    return bool(folder_models(Path(folder), USER))


def saved_folders(settings: QSettings) -> list[str]:
    """The folders the user added (QSettings hands back a list, a string or nothing)."""
    value: object = settings.value(KEY, []) or []
    return [value] if isinstance(value, str) else [str(p) for p in value] if isinstance(value, list) else []


def ask_for_folder(parent: QWidget) -> str:
    """The folder the user chose, or "" when they cancelled."""
    return QFileDialog.getExistingDirectory(parent, "Add a folder of models")


def keep_folder(settings: QSettings, sources: Sources, folder: str) -> Sources:
    """Save `folder` with the others and return `sources` that scan it too."""
    folders = saved_folders(settings)
    if Path(folder).resolve() not in {Path(p).resolve() for p in folders}:
        folders.append(folder)
        settings.setValue(KEY, folders)
    return dataclasses.replace(sources, extra=tuple(Path(p) for p in folders))
