"""Starting the GUI on qasync's event loop, which also runs the UI's background tasks."""

from __future__ import annotations

import asyncio
import sys


def run_gui() -> int:
    import qasync
    from PySide6.QtWidgets import QApplication

    from app import PRODUCT_NAME
    from app.ui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv)
    assert isinstance(app, QApplication)  # a QCoreApplication made elsewhere could show no window
    app.setApplicationName(PRODUCT_NAME)
    app.setOrganizationName(PRODUCT_NAME)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    window = MainWindow()
    window.show()
    app.lastWindowClosed.connect(loop.stop)
    with loop:
        loop.run_forever()
    return 0
