"""The window's Server switch: serve the loaded pair to other programs through the OpenAI API.

The server (app/server) runs on a thread and asyncio loop of its own and drives the window's own
engine worker with `submit(command, sink)`: the served replies go to the server, never to the
chat, and served requests wait in the worker's one queue with the chat's. The switch is a menu
action and a compact button in the status bar, which also shows the address with a Copy button
while serving. Each served request comes back on the server's thread as a `ServedRecord` and is
handed to the log pane through a queued signal, so the GUI never waits on the server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QSettings, Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMainWindow, QPushButton, QToolButton, QWidget

from app.server.records import library_models
from app.server.runner import (
    EngineHandle,
    LibraryModel,
    ModelsInfo,
    ServerConfig,
    ServerRunner,
    ServerStartError,
)
from app.ui.chat.chat_controller import ChatController
from app.ui.common.plain_speed import BaselineStatus
from app.ui.server.server_dialog import KEY, ON, ServerDialog, next_free_port, read_place, save_place
from app.ui.server.server_log import ServerLog

SHORTCUT, LOG_SHORTCUT = "Ctrl+Shift+E", "Ctrl+Shift+G"


class ServerBar(QWidget):
    """The status bar's part: the switch, the address while serving, and Copy."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.toggle = QToolButton()
        self.toggle.setCheckable(True)
        self.toggle.setToolTip(f"Serve the loaded models to other programs ({SHORTCUT})")
        self.address = QLabel("")
        self.address.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.copy = QPushButton("Copy")
        self.copy.setToolTip("Copy the address: give it to a program as its OpenAI base URL")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 4, 0)
        row.addWidget(self.address)
        row.addWidget(self.copy)
        row.addWidget(self.toggle)
        self.show_url(None)

    def show_url(self, url: str | None, network: bool = False) -> None:
        self.toggle.blockSignals(True)  # showing the state is not switching it
        self.toggle.setChecked(url is not None)
        self.toggle.blockSignals(False)
        self.toggle.setText("● Server on" if url is not None else "Server off")
        self.toggle.setStyleSheet("color: #2e8540; font-weight: bold" if url is not None else "")
        self.address.setText(
            "" if url is None else f"Serving at {url}" + (" and to the network" if network else "")
        )
        self.address.setVisible(url is not None)
        self.copy.setVisible(url is not None)


class ServerSwitch(QObject):
    """Owns the `ServerRunner` while serving; remembers the switch in the settings (`server/on`),
    so a window that quit while serving serves again once its pair is loaded."""

    served = Signal(object)  # ServedRecord, emitted on the server's thread
    changed = Signal(object)  # the base URL while serving, None when stopped

    def __init__(
        self,
        window: QMainWindow,
        settings: QSettings,
        controller: ChatController,
        engine: EngineHandle,
        report: Callable[[str], None],
    ) -> None:
        super().__init__(window)
        self.window, self.settings, self.controller = window, settings, controller
        self.engine, self.report = engine, report
        self.runner: ServerRunner | None = None
        self.url: str | None = None
        self._library: tuple[LibraryModel, ...] = ()
        self._plain: tuple[str, float] | None = None  # (main, its plain tok/s), the latest known
        self.action = QAction("Serve to other programs", window)
        self.action.setCheckable(True)
        self.action.setShortcut(QKeySequence(SHORTCUT))
        self.action.toggled.connect(self.switch)
        self.settings_action = QAction("Server settings…", window)
        self.settings_action.triggered.connect(self.edit_settings)
        self.log = ServerLog(window)
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.log)
        self.log.hide()
        self.log_action = self.log.toggleViewAction()
        self.log_action.setShortcut(QKeySequence(LOG_SHORTCUT))
        self.served.connect(self.log.add, Qt.ConnectionType.QueuedConnection)
        self.bar = ServerBar()
        self.bar.toggle.toggled.connect(self.action.setChecked)
        self.bar.copy.clicked.connect(self.copy_url)
        window.statusBar().addPermanentWidget(self.bar)
        self.waiting_for_pair = bool(settings.value(ON, False, type=bool))
        controller.pair_changed.connect(lambda _text: self._pair_changed())
        controller.baseline_status.connect(self._plain_known)

    # -- what the server reads (on its own thread: immutable values only) ----------------------
    def models(self) -> ModelsInfo:
        pair = self.controller.pair  # one reference read: a tuple the GUI thread replaces whole
        if pair is None:
            return ModelsInfo(None, None, self._library)
        plain = self._plain
        speed = plain[1] if plain is not None and plain[0] == pair[0] else None
        return ModelsInfo(pair[0], pair[1], self._library, speed)

    def _plain_known(self, status: BaselineStatus) -> None:
        """The main's plain speed, read here on the GUI thread (the cache is not the server's)."""
        if status.plain_tok_s:
            self._plain = (status.main, status.plain_tok_s)

    def library_scanned(self, result: Any) -> None:
        """The library's usable models with their suggested roles, for `/v1/models`."""
        if isinstance(result, Exception):
            return
        self._library = library_models(result[0])

    # -- the switch -----------------------------------------------------------------------------
    def switch(self, on: bool) -> None:
        if on == (self.runner is not None):
            return
        if on:
            self.start()
        else:
            self.stop()

    def start(self) -> bool:
        """Serve now; a failure (the port taken) is said in the banner and leaves the switch off."""
        self.waiting_for_pair = False
        place = read_place(self.settings)
        port, moved = place.port, ""
        if not place.port_chosen:  # the default port, or the next free one
            free = next_free_port(place.host, place.port)
            if free is not None and free != place.port:
                port = free
                moved = f"Port {place.port} is taken by another program, so SpecChat serves on port {port}."
        config = ServerConfig(host=place.host, port=port, api_key=place.api_key)
        runner = ServerRunner(config, self.engine, self.models, self.served.emit)
        try:
            url = runner.start()
        except ServerStartError as exc:
            self._show(None)
            self.report(f"The server did not start: {exc}.")
            return False
        self.runner = runner
        if place.network:  # clients on this computer use the loopback address, as the guard wants
            url = f"http://127.0.0.1:{port}/v1"
        self.settings.setValue(ON, True)
        self.log.show()  # shown on the first start; the View menu hides it again
        self._show(url, place.network)
        words = f"Serving at {url}" + (" and to other computers on the network" if place.network else "")
        self.window.statusBar().showMessage(f"{moved} {words}".strip(), 10_000)
        return True

    def stop(self, remember: bool = True) -> None:
        """Stop serving and free the port; `remember=False` (the window closing) keeps `server/on`
        as it was, so the next start serves again."""
        runner, self.runner = self.runner, None
        if runner is not None:
            runner.stop()
        if remember:
            self.settings.setValue(ON, False)
            self.waiting_for_pair = False
        self._show(None)

    def _show(self, url: str | None, network: bool = False) -> None:
        self.url = url
        self.action.blockSignals(True)
        self.action.setChecked(url is not None)
        self.action.blockSignals(False)
        self.bar.show_url(url, network)
        self.changed.emit(url)

    def _pair_changed(self) -> None:
        """A window that quit while serving serves again once its pair has loaded."""
        if self.waiting_for_pair and self.controller.pair is not None and self.runner is None:
            self.start()

    def copy_url(self) -> None:
        if self.url is not None:
            QGuiApplication.clipboard().setText(self.url)
            self.window.statusBar().showMessage(f"Copied {self.url}", 4000)

    def edit_settings(self) -> None:
        place = read_place(self.settings)
        stored = str(self.settings.value(KEY, "") or "") or None
        dialog = ServerDialog(place, stored, self.window)
        if dialog.exec():
            save_place(self.settings, dialog.value(), dialog.stored_key())
            if self.runner is not None:
                self.window.statusBar().showMessage(
                    "Server settings saved: they apply the next time the server is turned on.", 8000
                )
