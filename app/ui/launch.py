"""Starting the GUI, or rendering it offscreen to PNGs for review."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def run_gui(screenshot_dir: str | None = None) -> int:
    if screenshot_dir is not None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from app import PRODUCT_NAME
    from app.ui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv)
    app.setApplicationName(PRODUCT_NAME)
    window = MainWindow()
    window.resize(1100, 720)
    window.show()
    if screenshot_dir is not None:
        out = Path(screenshot_dir)
        out.mkdir(parents=True, exist_ok=True)
        app.processEvents()
        path = out / "main-window.png"
        if not window.grab().save(str(path)):
            print(f"error: could not write {path}", file=sys.stderr)
            return 1
        print(path)
        return 0
    return app.exec()
