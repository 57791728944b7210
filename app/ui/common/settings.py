"""The settings file the features share, and the one setting two features meet on.

Settings live in the app's data folder (settings.ini), so SPECCHAT_HOME moves them with the
conversations and tests stay apart from the user's own. Settings kept where Qt puts them by
default, from before, are carried over once.

The machines dialog stores which machines the main model is split across; the chat reads it when it
loads a pair. Both reach it here, so neither feature imports the other.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QSettings

from app.engine.library.paths import app_data_dir

HOSTFILE_KEY = "machines/hostfile"  # empty or absent: the main model runs on this machine alone


def app_settings() -> QSettings:
    path = app_data_dir() / "settings.ini"
    fresh = not path.exists()
    settings = QSettings(str(path), QSettings.Format.IniFormat)
    if fresh and not os.environ.get("SPECCHAT_HOME"):
        old = QSettings()  # the platform's own store, which earlier versions used
        for key in old.allKeys():
            settings.setValue(key, old.value(key))
    return settings


def chosen_hostfile(settings: QSettings) -> Path | None:
    """The hostfile the main model should be loaded across, or None for this machine alone."""
    value = settings.value(HOSTFILE_KEY, "")
    return Path(str(value)) if value else None
