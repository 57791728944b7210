"""The user's turn in the transcript: a padded, tinted box, so turns read apart at a glance."""

from __future__ import annotations

from PySide6.QtGui import QBrush, QTextCharFormat, QTextCursor, QTextFrameFormat

from app.ui.common.theme import SPACE, Theme


def open_bubble(cursor: QTextCursor, theme: Theme) -> QTextCursor:
    """A box at `cursor` (on the empty line under the turn's header); returns a cursor inside it."""
    frame = QTextFrameFormat()
    frame.setBackground(QBrush(theme.user_bg))
    frame.setPadding(SPACE + 2)
    frame.setBorder(1)
    frame.setBorderBrush(QBrush(theme.border))
    frame.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
    frame.setTopMargin(SPACE // 2)
    cursor.deletePreviousChar()  # the frame starts its own line: no empty one before it
    return cursor.insertFrame(frame).firstCursorPosition()


def close_bubble(after: QTextCursor) -> None:
    """Qt keeps an empty line after a frame; `after` (on it) makes it thin instead of a gap."""
    thin = QTextCharFormat()
    thin.setFontPointSize(1)
    after.setBlockCharFormat(thin)
