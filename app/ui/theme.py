"""Colours that follow the system's light or dark appearance."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette


@dataclass(frozen=True, slots=True)
class Theme:
    dark: bool
    text: QColor
    muted: QColor
    draft_bg: QColor  # tokens the main accepted from the draft model
    lookup_bg: QColor  # tokens accepted from prompt lookup
    rejected: QColor  # what the draft proposed and the main refused
    user_bg: QColor
    code_bg: QColor
    link: QColor
    syntax: dict[str, QColor]  # pygments top-level token kinds -> colour


def _syntax(dark: bool) -> dict[str, QColor]:
    light = {
        "Keyword": "#a626a4",
        "Name.Function": "#4078f2",
        "Name.Class": "#c18401",
        "Name.Builtin": "#0184bc",
        "Literal.String": "#50a14f",
        "Literal.Number": "#986801",
        "Comment": "#8a8f98",
        "Operator": "#383a42",
    }
    night = {
        "Keyword": "#c678dd",
        "Name.Function": "#61afef",
        "Name.Class": "#e5c07b",
        "Name.Builtin": "#56b6c2",
        "Literal.String": "#98c379",
        "Literal.Number": "#d19a66",
        "Comment": "#7f848e",
        "Operator": "#abb2bf",
    }
    return {k: QColor(v) for k, v in (night if dark else light).items()}


def is_dark() -> bool:
    app = QGuiApplication.instance()
    if not isinstance(app, QGuiApplication):  # none yet, or a console-only QCoreApplication
        return False
    scheme = app.styleHints().colorScheme()
    if scheme != Qt.ColorScheme.Unknown:
        return bool(scheme == Qt.ColorScheme.Dark)
    return bool(app.palette().color(QPalette.ColorRole.Window).lightness() < 128)


def current_theme(dark: bool | None = None) -> Theme:
    dark = is_dark() if dark is None else dark
    if dark:
        return Theme(
            True,
            QColor("#e6e6e6"),
            QColor("#8c8c8c"),
            QColor("#1f5130"),
            QColor("#1d3f66"),
            QColor("#8a6a6a"),
            QColor("#2b2f36"),
            QColor("#23262b"),
            QColor("#7fb2ff"),
            _syntax(True),
        )
    return Theme(
        False,
        QColor("#1d1d1f"),
        QColor("#7a7a7a"),
        QColor("#c9f0d3"),
        QColor("#cfe3ff"),
        QColor("#b08c8c"),
        QColor("#eef1f6"),
        QColor("#f5f6f8"),
        QColor("#1b62d1"),
        _syntax(False),
    )
