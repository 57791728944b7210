"""The conversations file and its one connection: opening it, healing a damaged one, and the
read-only stand-in (app.engine.store.opening) when it cannot be opened for writing.

Opening writes nothing before it knows the schema is this version's or older and the file is
writable and free: a newer version's file is left as it was, and a lock held elsewhere is found at
start, not at the first message. Writes wait `timeout` for a lock; opening waits `lock_wait`.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.engine.library.damage import is_damage, move_aside
from app.engine.store.opening import (
    CannotOpen,
    OpenProblem,
    Trouble,
    check_path,
    check_writable,
    problem_for,
    read_only_copy,
)
from app.engine.store.salvage import Recovery, salvage
from app.engine.store.schema import MIGRATIONS, SCHEMA_VERSION

log = logging.getLogger(__name__)
# How long opening waits for another program's brief write (another SpecChat saving an answer)
# before telling the user the file is held.
LOCK_WAIT_S = 2.0


def _rollback(db: sqlite3.Connection, error: BaseException) -> None:
    """Undo the open transaction. SQLite may have rolled it back already (a full disk does), and a
    failure here is noted on `error` and logged, never raised in its place: the user needs why the
    write failed, not why the cleanup did."""
    if not db.in_transaction:
        return
    try:
        db.execute("ROLLBACK")
    except sqlite3.Error as exc:
        log.warning("rolling back after %r also failed: %r", error, exc)
        error.add_note(f"Rolling back also failed: {exc}")


class StoreFile:
    """One connection, used from the thread that opened it (the UI thread).

    A file that cannot be opened for writing never stops the app: `problem` says why, and `db` is
    then a read-only copy of what could be read (app.engine.store.opening) until `retry` opens
    the file itself."""

    def __init__(self, path: Path, timeout: float, lock_wait: float) -> None:
        self.path = path
        self.timeout, self.lock_wait = timeout, lock_wait
        self.recovery: Recovery | None = None  # set when a damaged file was moved aside at open
        self.problem: OpenProblem | None = None  # set while the file is not open for writing
        self._opening: sqlite3.Connection | None = None
        problem = self._connect()
        if problem is not None:
            self.db, self.problem = read_only_copy(problem, lock_wait)

    def retry(self) -> bool:
        """Open the file itself again, after the user fixed what `problem` said; True once open."""
        if self.problem is None:
            return True
        copy = self.db
        problem = self._connect()
        if problem is None:
            copy.close()
            self.problem = None
            return True
        self.db = copy  # a failed open may have left its closed connection here
        self.problem = OpenProblem(problem.trouble, problem.path, problem.detail, self.problem.shown)
        return False

    def _connect(self) -> OpenProblem | None:
        """Open the file for writing, healing a damaged one; the problem when it cannot be."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            check_path(self.path)
            check_writable(self.path)
            try:
                self._open()
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                moved = move_aside(self.path)  # then closed: closing deletes a WAL SQLite could not read
                self._close_opening()
                self._open()
                self.recovery = salvage(moved, self.db, str(exc))
            return None
        except (OSError, CannotOpen, sqlite3.Error) as exc:
            self._close_opening()
            return problem_for(exc, self.path)
        finally:
            self._opening = None

    def _close_opening(self) -> None:
        if self._opening is not None:
            self._opening.close()

    def _open(self) -> None:
        """Nothing is written before the version is known to be ours and the file writable."""
        self._opening = db = sqlite3.connect(self.path, isolation_level=None, timeout=self.lock_wait)
        db.text_factory = lambda b: b.decode("utf-8", "replace")  # bad bytes never raise
        version = db.execute("PRAGMA user_version").fetchone()[0]  # damage or a lock shows here
        if version > SCHEMA_VERSION:
            raise CannotOpen(Trouble.NEWER, f"schema {version}, this SpecChat knows {SCHEMA_VERSION}")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable to the last commit but one
        db.execute("PRAGMA foreign_keys=ON")
        db.execute("BEGIN IMMEDIATE")  # a write lock held elsewhere shows now, not at the first message
        db.execute("ROLLBACK")
        self.db = db
        self._migrate()
        db.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        for number in range(version, SCHEMA_VERSION):
            with self.transaction():
                MIGRATIONS[number](self.db)
                self.db.execute(f"PRAGMA user_version={number + 1}")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Commit the block's writes together or not at all, raising the block's own error.

        A block inside another joins the outer transaction, so callers can group writes that each
        commit on their own elsewhere (a new conversation with its first turn)."""
        if self.db.in_transaction:
            yield
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException as exc:
            _rollback(self.db, exc)
            raise

    @property
    def schema_version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        self.db.close()
