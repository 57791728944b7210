"""Screenshot states of the first run's library: a GGUF imported from the window and selected as
the main, the picker showing it, importing it again, and a restart that reopens the conversation.

They need a real GGUF (SmolLM2 from `python -m app fetch-models`); without one they are left out.
Everything lands in a fresh data folder inside the throwaway one the screenshot script set up.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QApplication, QWidget

Wait = Callable[[QApplication, Callable[[], object], float], bool]
Save = Callable[[QApplication, QWidget, Path], Path]


def render_library(app: QApplication, out: Path, wait: Wait, save: Save) -> None:
    from app.devtools.fake_engine import FakeEngine
    from app.engine.gguf.fixtures import FIXTURES, gguf_path
    from app.engine.library.discovery import Sources
    from app.engine.library.paths import models_dir
    from app.ui.chat.settings_dialog import ChatSettings
    from app.ui.main_window import MainWindow

    gguf = gguf_path("smollm2")
    if not gguf.is_file() or gguf.stat().st_size != FIXTURES["smollm2"].size:
        print(f"skipped the import states: {gguf} is absent (python -m app fetch-models)")
        return
    os.environ["SPECCHAT_HOME"] = str(Path(os.environ["SPECCHAT_HOME"]) / "first-run")

    def window() -> MainWindow:
        w = MainWindow(
            engine_factory=lambda emit: FakeEngine(emit, rate=80.0),
            sources=Sources(None, None, models_dir(), use_hub=False),
        )
        w.show()
        return w

    w = window()
    w.library.start_import(str(gguf))
    wait(app, lambda: w.controller.pair is not None, 300)
    wait(app, lambda: w.stack.currentWidget() is w.view, 10)
    save(app, w, out / "import-selected-as-main.png")
    picker = w.picker()
    picker.resize(1000, 720)
    picker.show()
    wait(app, picker.drafts_checked, 60)
    save(app, picker, out / "import-listed-in-picker.png")
    picker.close()
    w.library.start_import(str(gguf))
    wait(app, lambda: "already in your library" in w.welcome.status.text(), 60)
    wait(app, lambda: w.controller.pair is not None, 30)
    save(app, w, out / "import-again-already-in-library.png")
    w.controller.chat_settings = ChatSettings(max_tokens=60)
    w.controller.send("What is the capital of France?")
    wait(app, lambda: not w.controller.busy, 30)
    w.resize(1000, 640)
    w.splitter.setSizes([300, 700])
    w.close()
    again = window()
    wait(app, lambda: again.controller.pair is not None, 30)
    save(app, again, out / "restart-reopens-conversation.png")
    again.close()
