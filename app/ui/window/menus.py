"""The main window's menu bar: every command with its shortcut, in one place to read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QMenuBar, QWidget

from app import PRODUCT_NAME
from app.engine.blas import ensure_blas
from app.ui.chat.chat_controller import ChatController
from app.ui.chat.sidebar import Sidebar
from app.ui.dashboard.dashboard import Dashboard
from app.ui.server.serving import ServerSwitch
from app.ui.window.about import AboutDialog
from app.ui.window.appearance import Appearance
from app.ui.window.glossary import GlossaryDialog


class MainWindow(Protocol):
    """What the menus reach in the window (a protocol, so this module needs no import of it)."""

    controller: ChatController
    dashboard: Dashboard
    sidebar: Sidebar
    appearance: Appearance
    serving: ServerSwitch
    highlight_action: QAction
    rejected_action: QAction
    sidebar_action: QAction
    dashboard_action: QAction

    def menuBar(self) -> QMenuBar: ...
    def close(self) -> bool: ...
    def export(self, kind: str) -> None: ...
    def import_gguf(self) -> None: ...
    def add_folder(self) -> None: ...
    def regenerate(self, key: int | None) -> None: ...
    def edit_settings(self) -> None: ...
    def check_answer(self, key: int | None = None) -> bool: ...
    def choose_models(self) -> None: ...
    def open_arena(self) -> Any: ...
    def set_highlight(self, on: bool) -> None: ...
    def set_rejected(self, on: bool) -> None: ...


def add_action(
    w: MainWindow,
    menu: QMenu,
    text: str,
    slot: Callable[..., object],
    shortcut: QKeySequence | QKeySequence.StandardKey | str | None = None,
    checkable: bool = False,
) -> QAction:
    action = QAction(text, menu)
    if shortcut is not None:
        action.setShortcut(QKeySequence(shortcut))
    action.setCheckable(checkable)
    (action.toggled if checkable else action.triggered).connect(slot)
    menu.addAction(action)
    return action


def build_menus(w: MainWindow) -> None:
    bar = w.menuBar()
    file = bar.addMenu("&File")
    add_action(w, file, "New chat", lambda: w.controller.new_conversation(), QKeySequence.StandardKey.New)
    add_action(w, file, "Export as Markdown…", lambda: w.export("md"))
    add_action(w, file, "Export as JSON…", lambda: w.export("json"))
    file.addSeparator()
    add_action(w, file, "Import GGUF…", w.import_gguf)
    add_action(w, file, "Add a model folder…", w.add_folder)
    file.addSeparator()
    add_action(w, file, "Quit", w.close, QKeySequence.StandardKey.Quit)
    chat = bar.addMenu("&Chat")
    add_action(w, chat, "Regenerate", lambda: w.regenerate(None), "Ctrl+R")
    add_action(w, chat, "Stop", lambda: w.controller.stop(), "Ctrl+.")
    add_action(w, chat, "System prompt and settings…", w.edit_settings, "Ctrl+,")
    add_action(w, chat, "Check losslessness of the last answer", lambda: w.check_answer(), "Ctrl+Shift+L")
    models = bar.addMenu("&Models")
    add_action(w, models, "Choose models…", w.choose_models, "Ctrl+L")
    add_action(w, models, "Draft arena…", w.open_arena, "Ctrl+Shift+A")
    models.addSeparator()
    models.addAction(w.serving.action)  # the status bar's Server button is the same switch
    models.addAction(w.serving.settings_action)
    view = bar.addMenu("&View")
    w.highlight_action = add_action(w, view, "Highlight draft tokens", w.set_highlight, checkable=True)
    w.rejected_action = add_action(w, view, "Show refused drafts on hover", w.set_rejected, checkable=True)
    w.sidebar_action = add_action(w, view, "Show conversations", w.sidebar.setVisible, "Ctrl+Shift+S", True)
    w.sidebar_action.setChecked(True)
    w.dashboard_action = w.dashboard.toggleViewAction()
    w.dashboard_action.setShortcut(QKeySequence("Ctrl+Shift+D"))
    view.addAction(w.dashboard_action)
    view.addAction(w.serving.log_action)
    w.appearance.add_menu(view)
    help_menu = bar.addMenu("&Help")
    add_action(w, help_menu, "Glossary…", lambda: GlossaryDialog(bar.window()).open())
    about = add_action(w, help_menu, f"About {PRODUCT_NAME}…", lambda: _about(bar.window()))
    about.setMenuRole(QAction.MenuRole.AboutRole)  # macOS moves it to the application menu


def _about(parent: QWidget) -> None:
    blas = ensure_blas()  # recorded at start-up, before MLX was imported; read here, never reloaded
    AboutDialog(blas.describe(), blas.advice(), parent).open()
