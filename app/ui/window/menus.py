"""The main window's menu bar: every command with its shortcut, in one place to read.

The menus run the commands they are given and add the actions of the parts that own them (the
dashboard's dock, the server switch, the appearance choice); the View toggles they make are
handed back, so the window can set them from the saved settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMenu, QMenuBar, QWidget

from app import PRODUCT_NAME
from app.engine.blas import ensure_blas
from app.ui.server.serving import ServerSwitch
from app.ui.window.about import AboutDialog
from app.ui.window.appearance import Appearance
from app.ui.window.glossary import GlossaryDialog


@dataclass(frozen=True)
class Commands:
    """What each menu entry runs, in menu order."""

    new_chat: Callable[[], object]
    export: Callable[[str], object]  # "md" or "json"
    import_gguf: Callable[[], object]
    add_folder: Callable[[], object]
    quit: Callable[[], object]
    regenerate: Callable[[], object]  # the last answer
    stop: Callable[[], object]
    edit_settings: Callable[[], object]
    check_answer: Callable[[], object]  # the last answer
    choose_models: Callable[[], object]
    open_arena: Callable[[], object]
    set_highlight: Callable[[bool], object]
    set_rejected: Callable[[bool], object]
    show_conversations: Callable[[bool], object]
    set_measure_on_battery: Callable[[bool], object]


@dataclass(frozen=True)
class ViewToggles:
    """The View menu's ticks, for the window to set from what was saved."""

    highlight: QAction
    rejected: QAction
    conversations: QAction
    dashboard: QAction
    measure_on_battery: QAction


def add_action(
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
    if checkable:
        action.toggled.connect(slot)  # with the new tick
    else:
        action.triggered.connect(lambda: slot())  # a command takes no `checked`
    menu.addAction(action)
    return action


def build_menus(
    bar: QMenuBar, do: Commands, dashboard: QDockWidget, serving: ServerSwitch, appearance: Appearance
) -> ViewToggles:
    """Fill `bar`: File, Chat, Models, View, Help, each entry running its command from `do`."""
    file = bar.addMenu("&File")
    add_action(file, "New chat", do.new_chat, QKeySequence.StandardKey.New)
    add_action(file, "Export as Markdown…", lambda: do.export("md"))
    add_action(file, "Export as JSON…", lambda: do.export("json"))
    file.addSeparator()
    add_action(file, "Import GGUF…", do.import_gguf)
    add_action(file, "Add a model folder…", do.add_folder)
    file.addSeparator()
    add_action(file, "Quit", do.quit, QKeySequence.StandardKey.Quit)
    chat = bar.addMenu("&Chat")
    add_action(chat, "Regenerate", do.regenerate, "Ctrl+R")
    add_action(chat, "Stop", do.stop, "Ctrl+.")
    add_action(chat, "System prompt and settings…", do.edit_settings, "Ctrl+,")
    add_action(chat, "Check losslessness of the last answer", do.check_answer, "Ctrl+Shift+L")
    models = bar.addMenu("&Models")
    add_action(models, "Choose models…", do.choose_models, "Ctrl+L")
    add_action(models, "Draft arena…", do.open_arena, "Ctrl+Shift+A")
    models.addSeparator()
    models.addAction(serving.action)  # the status bar's Server button is the same switch
    models.addAction(serving.settings_action)
    models.addSeparator()
    battery = add_action(
        models, "Measure plain speed on battery too", do.set_measure_on_battery, checkable=True
    )
    battery.setToolTip(
        "Speedups are measured against the main model alone, a few times in the background while you "
        "are idle. On battery that is skipped unless this is ticked."
    )
    view = bar.addMenu("&View")
    toggles = ViewToggles(
        highlight=add_action(view, "Highlight draft tokens", do.set_highlight, checkable=True),
        rejected=add_action(view, "Show refused drafts on hover", do.set_rejected, checkable=True),
        conversations=add_action(view, "Show conversations", do.show_conversations, "Ctrl+Shift+S", True),
        dashboard=dashboard.toggleViewAction(),
        measure_on_battery=battery,
    )
    toggles.conversations.setChecked(True)
    toggles.dashboard.setShortcut(QKeySequence("Ctrl+Shift+D"))
    view.addAction(toggles.dashboard)
    view.addAction(serving.log_action)
    appearance.add_menu(view)
    help_menu = bar.addMenu("&Help")
    add_action(help_menu, "Glossary…", lambda: GlossaryDialog(bar.window()).open())
    about = add_action(help_menu, f"About {PRODUCT_NAME}…", lambda: _about(bar.window()))
    about.setMenuRole(QAction.MenuRole.AboutRole)  # macOS moves it to the application menu
    return toggles


def _about(parent: QWidget) -> None:
    blas = ensure_blas()  # recorded at start-up, before MLX was imported; read here, never reloaded
    AboutDialog(blas.describe(), blas.advice(), parent).open()
