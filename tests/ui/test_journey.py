"""A newcomer's first run, end to end in the real window with the real engine: an empty data
folder, a GGUF imported from the File menu (a tiny synthetic llama, so this runs everywhere), the
model listed and selected, a question answered as a stream, then a restart that brings back the
conversation and the window as they were left."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QSize, Qt
from PySide6.QtWidgets import QFileDialog

from app.engine.library.discovery import Sources
from app.engine.library.paths import app_data_dir, models_dir
from app.engine.library.precision import default_bits
from app.engine.store.transcript import AnswerTurn, Change, MessageState
from app.ui.main_window import MainWindow
from tests.engine.gguf.ggufbuild import tiny_llama
from tests.ui.engine_gate import EngineGate

IMPORTED = f"tiny-llama-{default_bits()}bit"  # the window imports at this device's precision


def open_window(qtbot) -> MainWindow:
    """The window as the app makes it: its store and settings from the data folder (SPECCHAT_HOME),
    its library the data folder's models folder (the hub and LM Studio left out of the test)."""
    window = MainWindow(sources=Sources(None, None, models_dir(), use_hub=False))
    qtbot.addWidget(window)
    window.show()
    return window


def menu_action(window: MainWindow, text: str):
    for top in window.menuBar().actions():
        for action in top.menu().actions():
            if action.text() == text:
                return action
    raise AssertionError(f"no menu item {text!r}")


@pytest.fixture
def gguf(tmp_path, monkeypatch) -> Path:
    # Imports that miss the library would land in the model cache: keep it out of the user's.
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "model-cache"))
    (tmp_path / "downloads").mkdir()
    return tiny_llama(tmp_path / "downloads" / "tiny-llama.gguf")


def import_from_menu(qtbot, window: MainWindow, gguf: Path, monkeypatch) -> None:
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(gguf), ""))
    menu_action(window, "Import GGUF…").trigger()


def test_import_send_restart(qtbot, gguf, monkeypatch):
    assert not app_data_dir().exists()  # a first start: nothing in the data folder
    w = open_window(qtbot)
    qtbot.waitUntil(lambda: w.stack.currentWidget() is w.welcome)  # no models yet: what to do

    import_from_menu(qtbot, w, gguf, monkeypatch)
    imported = models_dir() / IMPORTED
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=120_000)
    assert (imported / "config.json").is_file()  # in the library's own folder
    assert Path(w.controller.pair[0]).resolve() == imported.resolve()  # selected as the main
    assert IMPORTED in w.pair_label.text()
    assert w.stack.currentWidget() is not w.welcome  # the chat pane, with a hint of what to type

    picker = w.picker()  # the picker lists it, selected as the main
    qtbot.waitUntil(lambda: picker.current_main() is not None, timeout=30_000)
    assert Path(picker.current_main().path).resolve() == imported.resolve()
    picker.close()

    changes: list[Change] = []
    w.controller.transcript.observers.append(lambda change, _turn: changes.append(change))
    gate = EngineGate(monkeypatch)
    w.composer.editor.setPlainText("abc")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    shown_while_running = gate.text_shown_while_held(qtbot, w)
    qtbot.waitUntil(lambda: Change.FINISHED in changes, timeout=120_000)
    answer = w.controller.transcript.last_answer()
    assert isinstance(answer, AnswerTurn), "the last turn is an answer"
    assert answer.state == MessageState.COMPLETE, "the answer is complete"
    assert w.stack.currentWidget() is w.view
    assert answer.text.strip(), "the answer has words"
    assert answer.text.strip()[:20] in w.view.toPlainText(), "the chat shows the answer"
    assert answer.text.startswith(shown_while_running), "it streamed: the start was shown first"

    cid = w.controller.conversation
    w.resize(760, 640)  # inside the offscreen screen, or the size would be clamped
    w.move(QPoint(40, 30))
    w.splitter.setSizes([180, 580])
    qtbot.waitUntil(lambda: w.size() == QSize(760, 640))
    sizes = w.splitter.sizes()
    w.close()

    again = open_window(qtbot)
    assert again.controller.conversation == cid  # the same conversation is open
    assert [t.text for t in again.controller.transcript.turns] == ["abc", answer.text]
    assert answer.text.strip()[:20] in again.view.toPlainText()
    assert again.size() == QSize(760, 640)  # the window as it was left
    # Offscreen, a window's frame is only known once shown, so its position may be a frame off.
    assert (again.pos() - QPoint(40, 30)).manhattanLength() <= 8
    assert again.splitter.sizes() == sizes
    qtbot.waitUntil(lambda: again.controller.pair is not None, timeout=60_000)
    assert Path(again.controller.pair[0]).resolve() == imported.resolve()
    again.close()


def test_importing_again_finds_it_in_the_library(qtbot, gguf, monkeypatch):
    w = open_window(qtbot)
    import_from_menu(qtbot, w, gguf, monkeypatch)
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=120_000)

    import_from_menu(qtbot, w, gguf, monkeypatch)
    qtbot.waitUntil(lambda: "already in your library" in w.welcome.status.text(), timeout=60_000)
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=60_000)
    assert Path(w.controller.pair[0]).resolve() == (models_dir() / IMPORTED).resolve()
    assert not w.banner.isVisible()  # no error this time
    assert sorted(p.name for p in models_dir().iterdir()) == [IMPORTED]
    w.close()


def test_the_dashboard_dock_comes_back(qtbot):
    from app.devtools.fake_engine import FakeEngine

    def window() -> MainWindow:
        w = MainWindow(
            engine_factory=lambda emit: FakeEngine(emit),
            sources=Sources(None, None, models_dir(), use_hub=False),
        )
        qtbot.addWidget(w)
        w.show()
        return w

    w = window()
    assert not w.dashboard.isVisible()  # hidden on a first start
    w.toggles.dashboard.trigger()
    qtbot.waitUntil(w.dashboard.isVisible)
    w.close()
    w = window()
    assert w.dashboard.isVisible(), "the dashboard comes back after a restart"
    assert w.toggles.dashboard.isChecked(), "the View menu shows it checked"
    w.toggles.dashboard.trigger()
    w.close()
    assert not window().dashboard.isVisible()
