"""Starting the GUI on qasync's event loop, which also runs the UI's background tasks.

Start-up writes one line to stderr once the window is on screen and its first library scan has
come back, from inside the running loop: that line is what a launch test (and a user reading a
terminal) can trust to mean "the app is up", where a line printed before the loop runs would not.
SIGTERM and Ctrl-C close the window as its close button does, so the window state and the unsent
text are saved and the exit status is 0.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QTimer

if TYPE_CHECKING:
    from app.ui.main_window import MainWindow

READY_PREFIX = "specchat: ready"
# Python runs a signal handler only between bytecodes; while Qt waits for events none run, so a
# short timer hands control back to Python often enough for SIGTERM to close the window promptly.
SIGNAL_POLL_MS = 150
# a worker inside one long MLX call cannot be interrupted; the window is already saved and gone
QUIT_WAIT_S = 1.5


def run_gui() -> int:
    import qasync
    from PySide6.QtWidgets import QApplication

    from app import PRODUCT_NAME

    started = time.monotonic()
    app = QApplication.instance() or QApplication(sys.argv)
    assert isinstance(app, QApplication)  # a QCoreApplication made elsewhere could show no window
    app.setApplicationName(PRODUCT_NAME)
    app.setOrganizationName(PRODUCT_NAME)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    window = open_main_window(started)
    poll = _close_on_signals(window)
    app.lastWindowClosed.connect(loop.stop)
    with loop:
        loop.run_forever()
    poll.stop()
    _flush()
    if window.bridge.engine_still_running():
        # Interpreter shutdown under a thread that is inside a native MLX call can crash in the
        # library's destructors; everything worth keeping is already written, so leave now.
        os._exit(0)
    return 0


def open_main_window(started: float | None = None) -> MainWindow:
    """The window as a user's start makes it: the data folder's store and settings, the default
    model folders, the real engine worker, the last pair restored; shown, and announced once up.
    Tests that drive a real start call this too."""
    from app.ui.main_window import MainWindow

    window = MainWindow(quit_wait=QUIT_WAIT_S)
    window.show()
    _announce_when_ready(window, time.monotonic() if started is None else started)
    return window


def _announce_when_ready(window: Any, started: float) -> None:
    """Print the ready line once the window is exposed and the first scan has answered."""
    state: dict[str, Any] = {}

    def check() -> None:
        if "scan" not in state or state.get("said"):
            return
        handle = window.windowHandle()
        if handle is None or not handle.isExposed():
            QTimer.singleShot(50, check)
            return
        state["said"] = True
        result = state["scan"]
        found = (
            f"scan failed: {result}"
            if isinstance(result, Exception)
            else f"{sum(1 for f in result[0] if f.usable)} usable models found"
        )
        print(
            f"{READY_PREFIX}: window shown, {found}, {time.monotonic() - started:.1f} s after start",
            file=sys.stderr,
            flush=True,
        )

    def on_scan(result: object) -> None:
        if "scan" not in state:
            state["scan"] = result
            check()

    window.library.scanned.connect(on_scan)


def _close_on_signals(window: Any) -> QTimer:
    """SIGTERM and SIGINT ask the window to close, as its close button does."""

    def handler(_signum: int, _frame: object) -> None:
        QTimer.singleShot(0, window.close)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
    poll = QTimer()
    poll.setInterval(SIGNAL_POLL_MS)
    poll.timeout.connect(lambda: None)
    poll.start()
    return poll


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
