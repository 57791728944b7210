"""A write to the conversations database failed: say why in words, a full disk above all."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

STORAGE_ERRORS = (sqlite3.Error, OSError)
SQLITE_FULL = 13
SQLITE_READONLY = 8


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)  # absent on errors not raised by SQLite itself
        return (code is not None and code & 0xFF == SQLITE_FULL) or "disk is full" in str(exc)
    return False


def is_read_only(exc: BaseException) -> bool:
    """The store refuses writes: the file could not be opened for saving (app.engine.store.opening)."""
    code = getattr(exc, "sqlite_errorcode", None) if isinstance(exc, sqlite3.Error) else None
    return code is not None and code & 0xFF == SQLITE_READONLY


def reason(exc: BaseException) -> str:
    if is_disk_full(exc):
        return "the disk is full"
    if is_read_only(exc):
        return "your conversations can only be read until the problem shown at start is fixed"
    return str(exc) or type(exc).__name__


def message_not_sent(exc: BaseException, path: Path) -> str:
    if is_disk_full(exc):
        return (
            "The disk is full — your message was not sent and is still in the box.\n\n"
            f"Free some space on the disk that holds {path}, then send it again."
        )
    return (
        "Your message could not be saved, so it was not sent; it is still in the box.\n\n"
        f"Reason: {reason(exc)}\nConversations database: {path}"
    )


def answer_not_started(exc: BaseException, path: Path) -> str:
    return (
        f"Your message was saved, but the answer could not be started: {reason(exc)}.\n\n"
        f"Conversations database: {path}"
    )


def draft_not_saved(exc: BaseException, path: Path) -> str:
    return (
        f"The unsent text in the message box could not be kept as a draft: {reason(exc)}. "
        "It stays in the box, but would be lost if SpecChat quit now.\n\n"
        f"Conversations database: {path}"
    )


def answer_not_regenerated(exc: BaseException, path: Path) -> str:
    return (
        f"A new answer could not be started, so the earlier one is kept: {reason(exc)}.\n\n"
        f"Conversations database: {path}"
    )


def answer_not_saved(exc: BaseException, path: Path) -> str:
    return (
        f"The answer could not be saved: {reason(exc)}. It stays on screen, and SpecChat saves it "
        "before your next message.\n\n"
        f"Conversations database: {path}"
    )


def speed_not_kept(exc: BaseException) -> str:
    return f"This answer's speed could not be kept in the history: {reason(exc)}."


def settings_not_saved(exc: BaseException, path: Path) -> str:
    return (
        f"The conversation's settings could not be saved: {reason(exc)}. They apply until you "
        "switch conversations or quit.\n\n"
        f"Conversations database: {path}"
    )
