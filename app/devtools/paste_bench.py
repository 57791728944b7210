"""Paste benchmark (not a test): how long the window's own thread works on a huge paste.

Pastes texts a user could paste (prose, blank lines, one line without spaces, whitespace) into the
real window over the synthetic engine, then sends it, and prints the seconds each step held the
UI thread. Run it against another checkout with `PYTHONPATH=<checkout> python <this file>` to put
two versions side by side.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def texts(size: int) -> dict[str, str]:
    prose = "The otter floats on its back and cracks a shell on its chest. "
    return {
        "prose": (prose * (size // len(prose) + 1))[:size],
        "blank lines": "Why?" + "\n" * size + "Because.",  # words around them, or nothing is sent
        "one line, no spaces": "x" * size,
        "spaces and tabs": "Why?" + (" \t" * size)[:size] + "Because.",
    }


def measure(size: int) -> list[tuple[str, float, float]]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    home = Path(tempfile.mkdtemp(prefix="specchat-paste-"))
    os.environ["SPECCHAT_HOME"] = str(home)
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    from app.devtools.fake_engine import FakeEngine
    from app.engine.library.discovery import Sources
    from app.engine.store.conversations import ConversationStore
    from app.ui.common.background import ensure_event_loop
    from app.ui.main_window import MainWindow

    ensure_event_loop(app)
    (home / "m").mkdir()
    rows: list[tuple[str, float, float]] = []
    for name, text in texts(size).items():
        window = MainWindow(
            engine_factory=lambda emit: FakeEngine(emit, rate=2000.0),
            store=ConversationStore(home / f"{len(rows)}.sqlite3"),
            settings=QSettings(str(home / "settings.ini"), QSettings.Format.IniFormat),
            sources=Sources(hub_cache=None, lmstudio=None, specchat=home / "m", use_hub=False),
            restore_pair=False,
        )
        window.resize(1000, 700)
        window.show()
        window.load_pair("/models/main", "/models/draft")
        while window.controller.pair is None:
            app.processEvents()
        start = time.perf_counter()
        window.composer.editor.setPlainText(text)
        app.processEvents()
        pasted = time.perf_counter()
        window.controller.send(text)
        app.processEvents()
        sent = time.perf_counter()
        rows.append((name, pasted - start, sent - pasted))
        window.controller.stop()
        window.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="characters per paste")
    args = parser.parse_args()
    print(f"{'paste of ' + format(args.size, ',') + ' characters':<34} {'paste s':>8} {'send s':>8}")
    for name, paste, send in measure(args.size):
        print(f"{name:<34} {paste:8.2f} {send:8.2f}")


if __name__ == "__main__":
    main()
