"""View ▸ Appearance: the choice switches the whole palette, survives a restart, and the token
highlights stay readable in both palettes."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

from app.ui.common import theme
from app.ui.common.theme import current_theme
from tests.ui.test_main_window import make_window


@pytest.fixture(autouse=True)
def back_to_system():
    """The choice and the palette are the application's: later tests get the system's again."""
    yield
    theme.set_choice("system")
    app = QApplication.instance()
    app.styleHints().unsetColorScheme()
    app.setPalette(app.style().standardPalette())


def _window(widget) -> QColor:
    return widget.palette().color(QPalette.ColorRole.Window)


def _background(widget) -> QColor:
    return widget.grab().toImage().pixelColor(5, widget.height() // 2)


def test_dark_choice_switches_the_palette_and_persists(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    w.appearance.actions["light"].trigger()
    light = _background(w.empty)
    qtbot.waitUntil(lambda: _window(w) == current_theme(False).window)  # widgets hear of it by event
    w.appearance.actions["dark"].trigger()
    assert w.appearance.actions["dark"].isChecked()
    dark = _background(w.empty)
    assert dark.lightness() < 80 < light.lightness()
    qtbot.waitUntil(lambda: _window(w) == current_theme(True).window)
    assert w.view.theme.dark, "the chat view turns dark"
    assert w.view.theme.base == current_theme(True).base, "the chat view takes the dark background"
    w.close()

    again = make_window(qtbot, specchat_home)  # same settings file: a restart
    assert again.appearance.actions["dark"].isChecked(), "after a restart Dark is still chosen"
    assert again.view.theme.dark, "after a restart the chat view is still dark"
    assert _background(again.empty).lightness() < 80
    again.appearance.actions["system"].trigger()
    assert again.settings.value("view/appearance") == "system"
    again.close()


def _contrast(a: QColor, b: QColor) -> float:
    def lum(c: QColor) -> float:
        parts = [v / 255 for v in (c.red(), c.green(), c.blue())]
        lin = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in parts]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("dark", [False, True])
def test_token_highlights_are_readable_in_both_palettes(dark):
    t = current_theme(dark)
    assert _contrast(t.text, t.draft_bg) >= 7, "draft tokens stay readable on their highlight"
    assert _contrast(t.text, t.lookup_bg) >= 7, "lookup tokens stay readable on their highlight"
    assert _contrast(t.rejected, t.base) >= 4.5
    assert _contrast(t.text, t.user_bg) >= 7, "the user's messages stay readable"
    assert _contrast(t.muted, t.base) >= 4.5, "muted words stay readable"
