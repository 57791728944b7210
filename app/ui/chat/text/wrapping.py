"""Line wrapping for text views that may hold a paste with no spaces.

Qt wraps at word boundaries when it can and anywhere when it cannot; on a long run of characters
with no boundary (base64, minified code, a pasted line of one character) that fallback costs time
in the square of the run, and a 1 MB run froze the window for over a minute. A view holding such
a run wraps anywhere instead: linear, and the run was going to be cut mid-way regardless.
"""

from __future__ import annotations

from PySide6.QtGui import QTextOption
from PySide6.QtWidgets import QPlainTextEdit, QTextEdit

# Runs up to this length lay out in time close to linear; past it the square starts to show.
LONG_RUN = 1000


def has_long_run(text: str) -> bool:
    """Whether `text` holds more than LONG_RUN characters in a row without whitespace."""
    return len(text) > LONG_RUN and max(map(len, text.split()), default=0) > LONG_RUN


def wrap_anywhere(view: QPlainTextEdit | QTextEdit, on: bool) -> None:
    """Switch the view's wrapping; a switch lays the whole document out again, so only on change."""
    mode = QTextOption.WrapMode.WrapAnywhere if on else QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere
    if view.wordWrapMode() != mode:
        view.setWordWrapMode(mode)
