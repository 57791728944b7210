"""Screenshots of long waits: a slow load and a slow prompt read, each with its progress row
(what is happening, seconds so far, an estimate) and the button that cancels it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QApplication, QWidget

Wait = Callable[..., bool]
Save = Callable[[QApplication, QWidget, Path], Path]


def render_waits(app: QApplication, home: Path, out: Path, wait: Wait, save: Save) -> None:
    from app.devtools.fake_engine import FakeEngine
    from app.devtools.fake_window import fake_window

    # a slow backend: seconds to load, and a long prompt read a chunk every half second
    window = fake_window(
        home / "waits",
        lambda emit: FakeEngine(
            emit, rate=60.0, load_seconds=2.5, prefill_seconds=40.0, prefill_chunks=64, prompt_tokens=4096
        ),
    )
    wait(app, lambda: window.stack.currentWidget() is window.welcome, 10)  # the empty folder's scan
    window.load_pair("/models/Qwen2.5-Coder-7B-Instruct-4bit", "/models/Qwen2.5-Coder-0.5B-Instruct-4bit")
    wait(app, lambda: "1 s so far" in " ".join(window.waits.text(k) for k in window.waits.active()), 10)
    save(app, window, out / "long-wait-loading.png")
    wait(app, lambda: window.controller.pair is not None, 10)
    window.controller.send("Summarize this long report for me, section by section.")
    wait(app, lambda: "3 s so far" in " ".join(window.waits.text(k) for k in window.waits.active()), 20)
    save(app, window, out / "long-wait-reading-prompt.png")
    window.controller.stop()
    window.close()
