"""View ▸ Appearance: System, Light or Dark, saved in the settings and applied as one palette."""

from __future__ import annotations

from PySide6.QtCore import QObject, QSettings, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QMenu

from app.ui.common import theme
from app.ui.common.theme import Theme, current_theme

KEY = "view/appearance"
LABELS = {"system": "Match the system", "light": "Light", "dark": "Dark"}


class Appearance(QObject):
    changed = Signal(object)  # the new Theme

    def __init__(self, settings: QSettings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.actions: dict[str, QAction] = {}
        self.group = QActionGroup(self)
        self._applying = False
        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):
            app.styleHints().colorSchemeChanged.connect(self._system_changed)
        self.apply(str(settings.value(KEY, "system")), save=False)

    def add_menu(self, menu: QMenu) -> QMenu:
        menu.addSeparator()
        sub = menu.addMenu("Appearance")
        for name, label in LABELS.items():
            action = QAction(label, self)
            action.setCheckable(True)
            action.setChecked(name == theme.choice())
            action.triggered.connect(lambda _=False, n=name: self.apply(n))
            self.group.addAction(action)
            sub.addAction(action)
            self.actions[name] = action
        return sub

    def apply(self, choice: str, save: bool = True) -> Theme:
        theme.set_choice(choice)
        if save:
            self.settings.setValue(KEY, theme.choice())
        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication) and not self._applying:
            self._applying = True  # changing the scheme may report a change of the scheme
            try:
                _apply_palette(app)
            finally:
                self._applying = False
        for name, action in self.actions.items():
            action.setChecked(name == theme.choice())
        chosen = current_theme()
        self.changed.emit(chosen)
        return chosen

    def _system_changed(self, _scheme: object) -> None:
        if theme.choice() == "system" and not self._applying:
            self.apply("system", save=False)


def _apply_palette(app: QGuiApplication) -> None:
    hints = app.styleHints()
    # The native styles (macOS, Windows 11) draw from the scheme; the palette covers the rest.
    if theme.choice() == "system":
        hints.unsetColorScheme()
        style = QApplication.style() if isinstance(app, QApplication) else None
        app.setPalette(style.standardPalette() if style is not None else QPalette())
        dark = theme.system_is_dark()  # read from the platform, or from its own palette
    else:
        dark = theme.is_dark()
        hints.setColorScheme(Qt.ColorScheme.Dark if dark else Qt.ColorScheme.Light)
    app.setPalette(theme.palette(current_theme(dark)))
