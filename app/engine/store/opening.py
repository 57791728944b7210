"""A conversations file that cannot be opened for writing: what is wrong, in words, and a copy
that can be read meanwhile.

Start-up never stops on the file. Held by another program, read-only, a folder or a link loop in
its place, or written by a newer SpecChat: the store reads what SQLite can into memory, refuses
every write (a refused write keeps the message in the box, so nothing is lost), and the window
says what is wrong and what to do. The file itself is never changed, moved or deleted here.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from app.engine.store.salvage import salvage
from app.engine.store.schema import MIGRATIONS

SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY = 5, 6, 8


class Trouble(StrEnum):
    LOCKED = "locked"
    READ_ONLY = "read-only"
    NEWER = "newer"
    FOLDER = "folder"
    LINK_LOOP = "link loop"
    UNREADABLE = "unreadable"


class CannotOpen(Exception):
    """Raised inside the store's open for a state that is not an SQLite error of its own."""

    def __init__(self, trouble: Trouble, detail: str) -> None:
        super().__init__(detail)
        self.trouble = trouble


@dataclass(frozen=True, slots=True)
class OpenProblem:
    """Why the file is not open for writing; `shown` conversations were read from it."""

    trouble: Trouble
    path: Path
    detail: str  # the technical account, for Details and bug reports
    shown: int = 0

    @property
    def can_retry(self) -> bool:
        """Retry helps once the user has fixed the file; a newer version's file stays newer."""
        return self.trouble is not Trouble.NEWER

    @property
    def title(self) -> str:
        return _TITLES[self.trouble]

    @property
    def text(self) -> str:
        return f"{_what(self)}\n\n{_shown(self)}\n\nConversations file: {self.path}"


_TITLES = {
    Trouble.LOCKED: "Conversations are in use elsewhere",
    Trouble.READ_ONLY: "Conversations can only be read",
    Trouble.NEWER: "Conversations are from a newer SpecChat",
    Trouble.FOLDER: "Conversations file is missing",
    Trouble.LINK_LOOP: "Conversations file cannot be found",
    Trouble.UNREADABLE: "Conversations could not be opened",
}


def _what(p: OpenProblem) -> str:
    if p.trouble is Trouble.LOCKED:
        return (
            "SpecChat is open elsewhere, or another program holds your conversations (a backup or "
            "sync tool, for example). Close the other SpecChat or let the program finish, then "
            "press Retry."
        )
    if p.trouble is Trouble.READ_ONLY:
        return (
            "Your conversations file can be read but not changed, so new messages cannot be saved. "
            "Give yourself permission to change it (or free the disk it is on), then press Retry."
        )
    if p.trouble is Trouble.NEWER:
        return (
            "Your conversations were made by a newer SpecChat; nothing was changed. This version "
            "cannot save into them without risking what the newer one wrote, so new messages cannot "
            "be saved. Use the newer SpecChat to go on with them."
        )
    if p.trouble is Trouble.FOLDER:
        return (
            "A folder is where SpecChat keeps its conversations file, so nothing can be read or "
            "saved; the folder was left as it is. Move or rename it, then press Retry."
        )
    if p.trouble is Trouble.LINK_LOOP:
        return (
            "The conversations file is a link that leads back to itself, so nothing can be read or "
            "saved; the link was left as it is. Remove or fix the link, then press Retry."
        )
    return (
        f"Your conversations could not be opened ({p.detail}). Nothing was changed. "
        "Once the file can be reached again, press Retry."
    )


def _shown(p: OpenProblem) -> str:
    if p.trouble in (Trouble.FOLDER, Trouble.LINK_LOOP) or p.shown == 0:
        read = "No conversations could be read, so none are shown."
    else:
        read = f"The {p.shown} conversation{'' if p.shown == 1 else 's'} it could read are shown."
    return f"{read} Until this is fixed, new messages cannot be saved; what you type stays in the box."


def check_path(path: Path) -> None:
    """Raise CannotOpen for a path SQLite must not be handed: a folder, a link loop, a device."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return  # a first start: the file is made
    except OSError as exc:
        trouble = Trouble.LINK_LOOP if exc.errno == errno.ELOOP else Trouble.UNREADABLE
        raise CannotOpen(trouble, exc.strerror or str(exc)) from exc
    if stat.S_ISDIR(info.st_mode):
        raise CannotOpen(Trouble.FOLDER, "a folder is in the file's place")
    if not stat.S_ISREG(info.st_mode):
        raise CannotOpen(Trouble.UNREADABLE, "it is not a regular file")


def check_writable(path: Path) -> None:
    """Raise CannotOpen when the file (or, for its journal, its folder) cannot be written."""
    if path.exists() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        raise CannotOpen(Trouble.READ_ONLY, "the file or its folder is read-only")


def problem_for(exc: BaseException, path: Path) -> OpenProblem:
    """The trouble behind an error raised while opening `path`."""
    if isinstance(exc, CannotOpen):
        return OpenProblem(exc.trouble, path, str(exc))
    code = int(getattr(exc, "sqlite_errorcode", 0)) & 0xFF
    if code in (SQLITE_BUSY, SQLITE_LOCKED):
        return OpenProblem(Trouble.LOCKED, path, str(exc))
    if code == SQLITE_READONLY:
        return OpenProblem(Trouble.READ_ONLY, path, str(exc))
    if isinstance(exc, OSError):
        if exc.errno == errno.ELOOP:
            return OpenProblem(Trouble.LINK_LOOP, path, str(exc))
        return OpenProblem(Trouble.UNREADABLE, path, exc.strerror or str(exc))
    return OpenProblem(Trouble.UNREADABLE, path, str(exc) or type(exc).__name__)


def read_only_copy(problem: OpenProblem, timeout: float) -> tuple[sqlite3.Connection, OpenProblem]:
    """An in-memory database of the current schema holding what SQLite can read of the file,
    which refuses every write; the problem comes back with how many conversations it holds."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.text_factory = lambda b: b.decode("utf-8", "replace")
    for number, migrate in enumerate(MIGRATIONS):
        migrate(db)
        db.execute(f"PRAGMA user_version={number + 1}")
    shown = 0
    if problem.trouble not in (Trouble.FOLDER, Trouble.LINK_LOOP) and problem.path.exists():
        shown = salvage(problem.path, db, problem.detail, timeout=timeout, pages=False).conversations
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA query_only=ON")
    return db, OpenProblem(problem.trouble, problem.path, problem.detail, shown)
