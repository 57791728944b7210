"""Every colour the app draws with, as one light and one dark palette.

The appearance follows the system unless the user picked Light or Dark (View ▸ Appearance); that
choice is kept here so every widget asks one place, and switching is one palette swap.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QGuiApplication, QPalette

CHOICES = ("system", "light", "dark")
# One type scale (times the system font) and one spacing step for every panel, so sizes read as
# one family instead of each widget picking its own.
TYPE_SCALE = {"title": 1.6, "heading": 1.2, "lead": 1.1, "body": 1.0, "small": 0.9}
SPACE = 8  # pixels; margins and gaps are multiples of it
_choice = "system"


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
    window: QColor  # behind panels and bars
    base: QColor  # behind the transcript, text boxes and charts
    card: QColor  # raised surfaces: empty-state cards, recommended pairs
    border: QColor
    accent: QColor  # buttons' highlight, chart lines and bars
    reference: QColor  # the dashed plain-speed line on charts
    warning_bg: QColor
    warning_text: QColor
    error_bg: QColor
    error_text: QColor
    error_border: QColor


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


def set_choice(choice: str) -> None:
    """ "system", "light" or "dark"; anything else means system."""
    global _choice
    _choice = choice if choice in CHOICES else "system"


def choice() -> str:
    return _choice


def system_is_dark() -> bool:
    app = QGuiApplication.instance()
    if not isinstance(app, QGuiApplication):  # none yet, or a console-only QCoreApplication
        return False
    scheme = app.styleHints().colorScheme()
    if scheme != Qt.ColorScheme.Unknown:
        return bool(scheme == Qt.ColorScheme.Dark)
    return bool(app.palette().color(QPalette.ColorRole.Window).lightness() < 128)


def is_dark() -> bool:
    return _choice == "dark" if _choice != "system" else system_is_dark()


def current_theme(dark: bool | None = None) -> Theme:
    dark = is_dark() if dark is None else dark
    c = _DARK if dark else _LIGHT
    return Theme(dark=dark, syntax=_syntax(dark), **{k: QColor(v) for k, v in c.items()})


# The token tints sit behind body text, so each keeps a contrast of at least 7:1 with `text`
# (tests/ui/window/test_appearance.py checks it); `rejected` is text itself, at least 4.5:1 on `base`.
_LIGHT = {
    "text": "#1d1d1f",
    "muted": "#6b6b70",
    "draft_bg": "#c9f0d3",
    "lookup_bg": "#cfe3ff",
    "rejected": "#9a4a4a",
    "user_bg": "#eaf1fb",
    "code_bg": "#f3f4f6",
    "link": "#1b62d1",
    "window": "#f5f5f7",
    "base": "#ffffff",
    "card": "#ffffff",
    "border": "#d9d9de",
    "accent": "#2f6fdf",
    "reference": "#d93c3c",
    "warning_bg": "#fff4e0",
    "warning_text": "#7a4b00",
    "error_bg": "#fdecea",
    "error_text": "#7a1f17",
    "error_border": "#c0392b",
}
_DARK = {
    "text": "#e8e8ea",
    "muted": "#9a9aa2",
    "draft_bg": "#1f4d2e",
    "lookup_bg": "#1c3a60",
    "rejected": "#e09a9a",
    "user_bg": "#2a3240",
    "code_bg": "#25272c",
    "link": "#7fb2ff",
    "window": "#1e1f22",
    "base": "#17181a",
    "card": "#26282c",
    "border": "#3a3c42",
    "accent": "#5b9bff",
    "reference": "#ff7b72",
    "warning_bg": "#3a2e14",
    "warning_text": "#f5d08a",
    "error_bg": "#3d1f1c",
    "error_text": "#ffb4a8",
    "error_border": "#e0685a",
}


def palette(theme: Theme) -> QPalette:
    """The Qt palette for a theme: what widgets without colours of their own draw with."""
    p = QPalette()
    roles = QPalette.ColorRole
    for role, colour in (
        (roles.Window, theme.window),
        (roles.WindowText, theme.text),
        (roles.Base, theme.base),
        (roles.AlternateBase, theme.card),
        (roles.Text, theme.text),
        (roles.Button, theme.card),
        (roles.ButtonText, theme.text),
        (roles.ToolTipBase, theme.card),
        (roles.ToolTipText, theme.text),
        (roles.PlaceholderText, theme.muted),
        (roles.Highlight, theme.accent),
        (roles.HighlightedText, QColor("#ffffff")),
        (roles.Link, theme.link),
        (roles.Mid, theme.border),
        (roles.Midlight, theme.border),
        (roles.Dark, theme.border),
    ):
        p.setColor(role, colour)
    for role in (roles.Text, roles.WindowText, roles.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, theme.muted)
    return p


def scaled(font: QFont, step: str, weight: QFont.Weight | None = None) -> QFont:
    """`font` at a step of the type scale."""
    out = QFont(font)
    out.setPointSizeF(font.pointSizeF() * TYPE_SCALE[step])
    if weight is not None:
        out.setWeight(weight)
    return out
