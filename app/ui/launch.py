"""Starting the GUI on qasync's event loop, or rendering scripted states to PNGs for review."""

from __future__ import annotations

import asyncio
import os
import sys


def run_gui(screenshot_dir: str | None = None) -> int:
    if screenshot_dir is not None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        from app.devtools.screenshots import render_all

        return render_all(screenshot_dir)
    import qasync
    from PySide6.QtWidgets import QApplication

    from app import PRODUCT_NAME
    from app.ui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv)
    app.setApplicationName(PRODUCT_NAME)
    app.setOrganizationName(PRODUCT_NAME)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    window = MainWindow()
    window.resize(1180, 760)
    window.show()
    app.lastWindowClosed.connect(loop.stop)
    with loop:
        loop.run_forever()
    return 0
