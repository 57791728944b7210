"""Screenshots of the empty states and of dark mode: a fresh window with models but none loaded,
a message sent before choosing models, the hint of a new chat, and a real small model's answer
in the dark palette (SmolLM2 or Qwen2.5-Coder from `fetch-models` when present, the toy pair
otherwise), through the real engine worker.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication, QWidget

Wait = Callable[..., bool]
Save = Callable[[QApplication, QWidget, Path], Path]
SMALL_MODELS = ("SmolLM2-135M-Instruct", "Qwen2.5-Coder-0.5B-Instruct")


def _real_model() -> Path | None:
    """A small real model imported by `fetch-models`, read in place (never written)."""
    from app.engine.gguf.fixtures import cache_root

    imported = cache_root() / "mlx"
    for name in SMALL_MODELS:
        for folder in sorted(imported.glob(f"{name}*")) if imported.is_dir() else []:
            if (folder / "config.json").is_file():
                return folder
    return None


def render_look(app: QApplication, home: Path, out: Path, wait: Wait, save: Save) -> None:
    from app.engine.library.discovery import Sources
    from app.engine.measure.toy import write_toy_models
    from app.engine.store.conversations import ConversationStore
    from app.ui.chat.settings_dialog import ChatSettings
    from app.ui.main_window import MainWindow

    root = home / "look"
    lib = root / "lib"
    toy = write_toy_models(root / "toy", seed=0)
    shutil.copytree(toy.main, lib / "toy-main")
    shutil.copytree(toy.draft, lib / "toy-draft")
    real = _real_model()
    if real is not None:
        (lib / real.name).symlink_to(real, target_is_directory=True)
    window = MainWindow(
        store=ConversationStore(root / "c.sqlite3"),
        sources=Sources(hub_cache=None, lmstudio=None, specchat=lib, use_hub=False),
        restore_pair=False,
        settings=QSettings(str(root / "settings.ini"), QSettings.Format.IniFormat),
    )
    window.resize(1180, 760)
    window.show()
    wait(app, lambda: window.library.has_models, 30)
    save(app, window, out / "models-none-loaded.png")
    window.composer.editor.setPlainText("What is speculative decoding?")
    window.composer.send.emit(window.composer.editor.toPlainText())
    save(app, window, out / "sent-before-choosing-models.png")

    window.appearance.apply("dark")
    main = real or lib / "toy-main"
    window.load_pair(str(main), None if real else str(lib / "toy-draft"))
    wait(app, lambda: window.controller.pair is not None, 120)
    window.composer.editor.clear()
    save(app, window, out / "dark-new-chat-hint.png")
    window.controller.chat_settings = ChatSettings(max_tokens=60)
    window.controller.send("In two short paragraphs, why is the sky blue?")
    wait(app, lambda: not window.controller.busy, 300)
    save(app, window, out / f"dark-answer-{'real-model' if real else 'toy-models'}.png")
    window.appearance.apply("system")
    window.close()
