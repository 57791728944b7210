"""The main window over a synthetic engine in a folder of its own, as the screenshot states use it."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings

from app.engine.library.discovery import Sources
from app.engine.store.conversations import ConversationStore
from app.ui.common.engine_bridge import EngineFactory
from app.ui.main_window import MainWindow


def fake_window(root: Path, engine_factory: EngineFactory) -> MainWindow:
    """A shown 1180 x 760 window whose store, settings and (empty) model folder live under `root`."""
    (root / "models").mkdir(parents=True)
    window = MainWindow(
        engine_factory=engine_factory,
        store=ConversationStore(root / "c.sqlite3"),
        settings=QSettings(str(root / "settings.ini"), QSettings.Format.IniFormat),
        sources=Sources(hub_cache=None, lmstudio=None, specchat=root / "models", use_hub=False),
        restore_pair=False,
    )
    window.resize(1180, 760)
    window.show()
    return window
