"""Kill the app mid-answer (SIGKILL) and reopen it: the turn and its last checkpoint survive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from PySide6.QtCore import QSettings

from app.devtools.fake_engine import VOCAB, FakeEngine
from app.engine.library.discovery import Sources
from app.engine.store.conversations import ConversationStore
from app.ui.main_window import MainWindow

RATE = 200.0

CHILD = f"""
import json, os, sys, time
os.environ["QT_QPA_PLATFORM"] = "offscreen"
from pathlib import Path
import app.ui
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication
from app.engine.store.conversations import ConversationStore
from app.engine.library.discovery import Sources
from app.devtools.fake_engine import FakeEngine
from app.ui.common.background import ensure_event_loop
from app.ui.main_window import MainWindow
from app.ui.chat.settings_dialog import ChatSettings
home = Path(sys.argv[1])
qt = QApplication([])
ensure_event_loop(qt)
w = MainWindow(engine_factory=lambda emit: FakeEngine(emit, rate={RATE}), store=ConversationStore(home / "c.sqlite3"),
               settings=QSettings(str(home / "s.ini"), QSettings.Format.IniFormat),
               sources=Sources(None, None, home, use_hub=False), restore_pair=False)
w.show()
w.load_pair("/m/main", "/m/draft")
while w.controller.pair is None:
    qt.processEvents()
saved = []  # the answer's text at each checkpoint the window writes while it streams
checkpoint = w.store.checkpoint
def recording(message_id, content, *args, **kwargs):
    checkpoint(message_id, content, *args, **kwargs)
    saved.append(content)
w.store.checkpoint = recording
w.controller.chat_settings = ChatSettings(max_tokens=100000)
w.controller.send("a long answer please")
while w.controller.live.stats.tokens <= 200 or len(saved) < 2:
    qt.processEvents()
    time.sleep(0.005)
print(json.dumps({{"shown": w.controller.live.stats.tokens, "saved": saved[-1]}}), flush=True)
time.sleep(600)  # the window writes nothing more; the engine's thread streams on until the kill
"""


def test_sigkill_mid_stream_then_reopen(qtbot, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(home)], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    report = json.loads(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    window = MainWindow(
        engine_factory=lambda emit: FakeEngine(emit),
        store=ConversationStore(home / "c.sqlite3"),
        settings=QSettings(str(home / "s.ini"), QSettings.Format.IniFormat),
        sources=Sources(None, None, home, use_hub=False),
        restore_pair=False,
    )
    qtbot.addWidget(window)
    assert window.sidebar.model.rowCount() == 1
    window.sidebar.selected.emit(window.sidebar.ids()[0])
    user, answer = window.store.load(window.controller.conversation).messages
    assert user.content == "a long answer please"
    assert answer.state == "partial", "the interrupted answer is saved as partial"
    assert answer.content == report["saved"], "what was saved is what the crash report says"
    n = answer.stats.tokens
    assert 0 < n <= report["shown"]
    assert answer.content == "".join(VOCAB[i % len(VOCAB)] for i in range(n))
    assert "interrupted" in window.view.toPlainText()
    info = window.view.info_at(window.view.toPlainText().index("Speculative") + 2)
    # highlighting survived
    assert info is not None, "the text keeps its tokens"
    assert info["provenance"] in ("main", "draft", "lookup"), "highlighting survived the crash"
    window.close()
