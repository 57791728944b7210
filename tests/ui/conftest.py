"""Qt tests run offscreen: no display is needed."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest


@pytest.fixture(scope="session", autouse=True)
def event_loop(qapp):
    """qasync's loop on the test QApplication, as the app runs under `python -m app`: background
    tasks (scans, downloads, imports) then run whenever pytest-qt processes events."""
    from app.ui.common.background import ensure_event_loop

    loop = ensure_event_loop(qapp)
    yield loop
    loop.stop()  # also marks it not running, so it may be closed
    loop.close()


@pytest.fixture(autouse=True)
def specchat_home(tmp_path, monkeypatch):
    """Each test gets its own app-data folder, so caches never leak between tests."""
    home = tmp_path / "specchat-home"
    monkeypatch.setenv("SPECCHAT_HOME", str(home))
    return home


@pytest.fixture
def window(qtbot, specchat_home):
    """The window over the synthetic engine with a pair loaded; files may define their own."""
    from tests.ui.test_main_window import make_window

    w = make_window(qtbot, specchat_home)
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    yield w
    w.close()


def open_window(qtbot, home, library, main: str, draft: str | None):
    """A main window over its own store, settings and model folder, shown, with `main` + `draft`
    loaded through the real worker (the toy pair loads in seconds)."""
    from PySide6.QtCore import QSettings

    from app.engine.library.discovery import Sources
    from app.engine.store.conversations import ConversationStore
    from app.ui.main_window import MainWindow

    w = MainWindow(
        store=ConversationStore(home / "c.sqlite3"),
        settings=QSettings(str(home / "s.ini"), QSettings.Format.IniFormat),
        sources=Sources(None, None, library, use_hub=False),
        restore_pair=False,
    )
    qtbot.addWidget(w)
    w.show()
    w.load_pair(main, draft)
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=60_000)
    return w
