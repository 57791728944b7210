"""`python -m app --screenshot DIR`: scripted states rendered offscreen and saved as PNGs.

Everything runs against a throwaway app-data folder, the synthetic engine and the toy models,
so the pictures are reproducible and nothing of the user's is touched; the last pictures show a
real fetched model answering through the real engine (screenshots_real.py).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication, QWidget

if TYPE_CHECKING:
    from app.ui.main_window import MainWindow


def _wait(app: QApplication, until: Callable[[], object], timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        app.processEvents()
        if until():
            return True
        time.sleep(0.01)
    return False


def _streamed(window: MainWindow) -> int:
    """Tokens of the answer streaming now (0 when none is)."""
    live = window.controller.live
    return live.stats.tokens if live is not None else 0


def _save(app: QApplication, widget: QWidget, path: Path) -> Path:
    app.processEvents()
    if not widget.grab().save(str(path)):
        raise OSError(f"could not write {path}")
    print(path)
    return path


def _window(home: Path, models: Path, rate: float) -> MainWindow:
    from app.devtools.fake_engine import FakeEngine
    from app.engine.library.discovery import Sources
    from app.engine.store.conversations import ConversationStore
    from app.ui.main_window import MainWindow

    window = MainWindow(
        engine_factory=lambda emit: FakeEngine(emit, rate=rate, prefill_seconds=0.15),
        store=ConversationStore(home / "c.sqlite3"),
        settings=QSettings(str(home / "settings.ini"), QSettings.Format.IniFormat),
        sources=Sources(hub_cache=None, lmstudio=None, specchat=models, use_hub=False),
        restore_pair=False,
    )
    window.resize(1180, 760)
    window.show()
    return window


def _toy_library(root: Path) -> Path:
    from app.engine.measure.toy import write_toy_models

    toy = write_toy_models(root / "toy", seed=0)
    lib = root / "lib"
    for name, src in (("toy-main", toy.main), ("toy-draft", toy.draft), ("toy-altered-draft", toy.draft)):
        shutil.copytree(src, lib / name)
    path = lib / "toy-altered-draft" / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["added_tokens"][2]["content"] = "<|im_stop|>"
    path.write_text(json.dumps(data), encoding="utf-8")
    return lib


def _history_and_baseline(app: QApplication, window: MainWindow, out: Path) -> None:
    """Short answers of other kinds in their own chats fill the history; the first one's context
    has no plain speed yet, so the app measures it in the background (shot while measuring)."""
    from app.ui.chat.settings_dialog import ChatSettings

    window.dashboard.show()
    from app.devtools.fake_engine import FakeEngine

    window.resize(1640, 820)
    engine, plain = window.bridge.engine, window.controller.plain
    if isinstance(engine, FakeEngine):  # plain's timing noise, so the speedup shows its range
        steady, spread = engine.plain_rate, iter((0.95, 1.0, 1.05) * 4)
        plain.measured.connect(lambda _e: setattr(engine, "plain_rate", steady * next(spread, 1.0)))
    for i, (text, settings) in enumerate(
        (
            ("Write a Python function that reverses a string", ChatSettings(max_tokens=60)),
            ("Write a haiku about the sea", ChatSettings(max_tokens=40, temperature=0.7)),
        )
    ):
        window.controller.new_conversation()
        window.controller.chat_settings = settings
        window.controller.send(text)
        _wait(app, lambda: not window.controller.busy, 30)
        if _wait(app, lambda: "Measuring" in window.dashboard.baseline_note.text(), 2):
            _save(app, window, out / "dashboard-measuring-baseline.png")
        _wait(app, lambda: not plain.measuring and plain.target is None, 30)
        if i == 0:  # measured three times under the answer's load: the ratio and its range
            _save(app, window, out / "honest-speedup.png")
    window.dashboard.hide()
    window.resize(1180, 760)


def render_all(out_dir: str) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="specchat-shots-"))
    os.environ["SPECCHAT_HOME"] = str(home)
    app = QApplication.instance() or QApplication(sys.argv)
    assert isinstance(app, QApplication)  # a console-only QCoreApplication cannot show windows
    from app.ui.chat.settings_dialog import ChatSettings
    from app.ui.common.background import ensure_event_loop

    ensure_event_loop(app)
    empty = home / "empty"
    empty.mkdir()
    window = _window(home, empty, rate=60.0)
    _wait(app, lambda: window.stack.currentWidget() is window.welcome, 10)
    _save(app, window, out / "welcome.png")

    window.load_pair("/models/Qwen2.5-7B-Instruct-4bit", "/models/Qwen2.5-0.5B-Instruct-4bit")
    _wait(app, lambda: window.controller.pair is not None, 10)
    _history_and_baseline(app, window, out)
    window.controller.new_conversation()
    window.controller.chat_settings = ChatSettings(max_tokens=110)
    window.controller.send("How does speculative decoding work?")
    _wait(app, lambda: not window.controller.busy, 30)
    window.controller.chat_settings = ChatSettings(max_tokens=10_000)
    window.controller.send("Say it again, briefly <img src='file:///etc/passwd'>")
    _wait(app, lambda: _streamed(window) > 45, 30)
    _save(app, window, out / "streaming.png")
    window.toggles.rejected.setChecked(True)
    _wait(app, lambda: _streamed(window) > 70, 30)
    _save(app, window, out / "streaming-rejected-drafts.png")
    window.dashboard.show()
    window.resize(1640, 820)
    _wait(app, lambda: _streamed(window) > 110, 30)
    _save(app, window, out / "dashboard-mid-generation.png")
    window.dashboard.hide()
    window.resize(1180, 760)
    _wait(app, lambda: window.controller.live is not None and window.controller.live.stats.bypassed, 30)
    _save(app, window.strip, out / "stats-speculation-paused.png")
    window.controller.stop()
    _save(app, window, out / "stopped-with-stats.png")
    window.dashboard.show()
    window.dashboard.tabs.setCurrentWidget(window.dashboard.history)
    window.resize(1640, 820)
    _save(app, window, out / "dashboard-history.png")
    window.close()

    from app.engine.library.discovery import Sources
    from app.ui.picker.picker import PickerDialog

    lib = _toy_library(home)
    picker = PickerDialog(
        Sources(hub_cache=None, lmstudio=None, specchat=lib, use_hub=False), usable_memory=64 * 2**30
    )
    picker.resize(1000, 720)
    picker.show()
    _wait(app, picker.drafts_checked, 60)
    picker.show_incompatible.setChecked(True)
    _save(app, picker, out / "picker-incompatible.png")
    picker.close()

    from app.devtools.screenshots_checks import render_checks
    from app.devtools.screenshots_library import render_library
    from app.devtools.screenshots_picker import render_picker_guide

    render_picker_guide(app, home, out, _wait, _save)

    render_checks(app, home, out, _wait, _save)

    from app.devtools.screenshots_waits import render_waits

    render_waits(app, home, out, _wait, _save)

    from app.devtools.screenshots_presets import render_presets

    render_presets(app, home, out, _wait, _save)

    from app.devtools.screenshots_server import render_server

    render_server(app, home, out, _wait, _save)

    from app.devtools.screenshots_look import render_look

    render_look(app, home, out, _wait, _save)

    from app.ui.window.glossary import GlossaryDialog

    glossary = GlossaryDialog()
    glossary.show()
    _save(app, glossary, out / "glossary.png")
    glossary.close()

    from app.devtools.screenshots_markdown import render_markdown

    render_markdown(app, home, out, _wait, _save)

    render_library(app, out, _wait, _save)

    from app.devtools.screenshots_hosts import render_hosts

    render_hosts(app, home, out, _wait, _save)

    from app.devtools.screenshots_real import render_real_model

    render_real_model(app, home, out, _wait, _save)
    shutil.rmtree(home, ignore_errors=True)
    return 0
