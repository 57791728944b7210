"""Screenshots of a real model answering in the window: the real engine worker and the real
16-bit fixtures that `python -m app fetch-models` imports, so the picture shows real text, real
draft highlighting and the stats line a user sees on this machine.

The Qwen2.5-Coder 1.5B/0.5B pair is used where both are fetched (drafted words highlighted),
else SmolLM2-135M alone; with neither, it says so and renders nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtWidgets import QApplication, QWidget

Wait = Callable[..., bool]
Save = Callable[[QApplication, QWidget, Path], Path]
QUESTION = "Write a Python function that reverses a string."
ANSWER_TOKENS = 48  # a few seconds to a minute on a CPU: enough for a code block and its stats


def _real_pair() -> tuple[Path, Path | None] | None:
    from app.engine.gguf.fixtures import mlx_path

    main, draft, alone = mlx_path("qwen1.5b", 16), mlx_path("qwen0.5b", 16), mlx_path("smollm2", 16)
    if (main / "config.json").is_file() and (draft / "config.json").is_file():
        return main, draft
    if (alone / "config.json").is_file():
        return alone, None
    return None


def render_real_model(app: QApplication, home: Path, out: Path, wait: Wait, save: Save) -> None:
    from PySide6.QtCore import QSettings

    from app.engine.library.discovery import Sources
    from app.engine.store.conversations import ConversationStore
    from app.engine.worker import EngineWorker
    from app.ui.main_window import MainWindow

    pair = _real_pair()
    if pair is None:
        print("real-model screenshots skipped: fetch a model first (python -m app fetch-models)")
        return
    main, draft = pair
    folder = home / "real"
    folder.mkdir(parents=True, exist_ok=True)
    window = MainWindow(
        engine_factory=EngineWorker,
        store=ConversationStore(folder / "c.sqlite3"),
        settings=QSettings(str(folder / "settings.ini"), QSettings.Format.IniFormat),
        sources=Sources(None, None, main.parent, use_hub=False),
        restore_pair=False,
    )
    window.resize(1180, 760)
    window.show()
    window.load_pair(str(main), str(draft) if draft else None)
    if not wait(app, lambda: window.controller.pair is not None, 600):
        raise RuntimeError(f"{main.name} did not load for the screenshot")
    controller = window.controller
    controller.save_settings(replace(controller.chat_settings, max_tokens=ANSWER_TOKENS, k=4))
    started = time.monotonic()
    controller.send(QUESTION)
    wait(app, lambda: controller.live is not None and controller.live.stats.tokens >= 6, 600)
    save(app, window, out / "real-model-streaming.png")
    if not wait(app, lambda: not controller.busy, 1200):
        raise RuntimeError("the real model did not finish its answer for the screenshot")
    wait(app, lambda: False, 0.5)  # the last batch's repaint
    save(app, window, out / "real-model-answer.png")
    print(f"real model: {main.name}{' + ' + draft.name if draft else ''}, {time.monotonic() - started:.0f} s")
    window.close()
