"""Screenshots of the losslessness check and the draft arena, measured for real on the toy models
through the real engine worker (the synthetic engine has no models to measure).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication, QWidget

Wait = Callable[..., bool]
Save = Callable[[QApplication, QWidget, Path], Path]


def _library(root: Path) -> Path:
    from app.engine.measure.toy import write_toy_models

    toy = write_toy_models(root / "toy", seed=0)
    lib = root / "lib"
    for name, src in (
        ("toy-main", toy.main),
        ("toy-draft", toy.draft),
        ("toy-random-draft", toy.draft_random),
    ):
        shutil.copytree(src, lib / name)
    return lib


def render_checks(app: QApplication, home: Path, out: Path, wait: Wait, save: Save) -> None:
    from app.engine.library.discovery import Sources
    from app.engine.store.conversations import ConversationStore
    from app.engine.store.transcript import AnswerTurn
    from app.ui.chat.settings_dialog import ChatSettings
    from app.ui.main_window import MainWindow
    from app.ui.picker.picker import PickerDialog

    root = home / "checks"
    lib = _library(root)
    sources = Sources(hub_cache=None, lmstudio=None, specchat=lib, use_hub=False)
    window = MainWindow(
        store=ConversationStore(root / "c.sqlite3"),
        sources=sources,
        restore_pair=False,
        settings=QSettings(str(root / "settings.ini"), QSettings.Format.IniFormat),
    )
    window.resize(1180, 760)
    window.show()
    window.load_pair(str(lib / "toy-main"), str(lib / "toy-draft"))
    wait(app, lambda: window.controller.pair is not None, 60)
    for text in ("Write a haiku about speculative decoding", "And one about caches"):
        window.controller.chat_settings = ChatSettings(max_tokens=40, speculation="fixed", k=3)
        window.controller.send(text)
        wait(app, lambda: not window.controller.busy, 60)
    transcript = window.controller.transcript
    first, second = (m for m in transcript if isinstance(m, AnswerTurn))
    window.check_answer(first.key)
    wait(app, lambda: not window.checker.busy, 60)
    save(app, window, out / "lossless-identical.png")
    ids = second.stats.token_ids
    tampered = ids[:6] + ((ids[6] + 97) % 256,) + ids[7:]  # a tampered answer, to show a divergence
    transcript.checkpoint(second, second.state, replace(second.stats, token_ids=tampered))
    window.check_answer(second.key)
    wait(app, lambda: not window.checker.busy, 60)
    window.view.scroll_to_end()
    save(app, window, out / "lossless-divergence-tampered.png")

    arena = window.open_arena()
    wait(app, lambda: arena.candidates.count() == 3, 60)
    arena.tokens.setValue(24)
    arena.run()
    wait(app, lambda: arena.last_progress is not None and arena.last_progress.done >= 3, 120)
    save(app, arena, out / "arena-running.png")
    wait(app, lambda: not arena.running, 300)
    save(app, arena, out / "arena-results.png")
    arena.close()
    window.close()

    picker = PickerDialog(sources, usable_memory=64 * 2**30)
    picker.resize(1000, 720)
    picker.show()
    wait(app, picker.drafts_checked, 60)
    save(app, picker, out / "picker-arena-speedups.png")
    picker.close()
