"""Healing a damaged conversations database: move it aside, never delete it, and copy out what
SQLite can still read, table by table and row by row, keeping every id. Where SQLite could not
read a table to its end (its schema page lost, above all), the table pages are walked directly
(app.engine.store.page_walk) for the rows it missed."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from app.engine.store.page_walk import restore, tables_of, walk

MAX_ROWID = 2**63 - 1
LINEAR_PROBES = 1000  # past this many unreadable rowids in a row, probes double their stride


@dataclass(frozen=True, slots=True)
class Recovery:
    """What happened at open, for the window to tell the user."""

    moved_to: Path
    reason: str
    conversations: int  # conversations in the fresh database after salvage
    messages: int
    complete: bool  # every table was read to its end without an error


def _open_readonly(source: Path, timeout: float) -> sqlite3.Connection:
    wal = Path(f"{source}-wal")
    # Immutable skips locking and never creates companions; a WAL with frames needs the real mode.
    mode = "ro" if wal.exists() and wal.stat().st_size > 0 else "ro&immutable=1"
    src = sqlite3.connect(
        f"{source.resolve().as_uri()}?mode={mode}", uri=True, isolation_level=None, timeout=timeout
    )
    src.text_factory = lambda b: b.decode("utf-8", "replace")
    src.execute("PRAGMA writable_schema=ON")  # reads a file shorter than its header claims
    return src


def _copy_table(src: sqlite3.Connection, dest: sqlite3.Connection, table: str) -> tuple[int, bool]:
    """Copy the rows SQLite can read; an unreadable page is stepped over by probing later rowids."""
    ours = [r[1] for r in dest.execute(f'PRAGMA table_info("{table}")')]
    theirs = {r[1] for r in src.execute(f'PRAGMA table_info("{table}")')}
    cols = [c for c in ours if c in theirs]
    if not cols:
        return 0, not theirs and table in ("runs", "drafts")  # an old schema has neither
    names = ", ".join(f'"{c}"' for c in cols)
    select = f'SELECT rowid, {names} FROM "{table}" NOT INDEXED WHERE rowid >= ? ORDER BY rowid'
    insert = f'INSERT INTO "{table}"({names}) VALUES ({", ".join("?" * len(cols))})'
    copied, complete, failures, start = 0, True, 0, -MAX_ROWID - 1
    while start <= MAX_ROWID:
        try:
            for row in src.execute(select, (start,)):
                if int(row[0]) < start:  # a damaged page can yield rowids out of order
                    raise sqlite3.DatabaseError("rowids out of order")
                start, failures = int(row[0]) + 1, 0
                try:
                    dest.execute(insert, row[1:])
                    copied += 1
                except sqlite3.Error:
                    complete = False
            break
        except sqlite3.DatabaseError:
            complete, failures = False, failures + 1
            start += 1 if failures <= LINEAR_PROBES else 2 ** (failures - LINEAR_PROBES)
    return copied, complete


def _copy(source: Path, dest: sqlite3.Connection, tables: list[str], timeout: float) -> list[str]:
    """Copy each table SQLite can read; returns the tables it could not read to their end."""
    try:
        src = _open_readonly(source, timeout)
    except sqlite3.Error:
        return tables
    try:
        src.execute("SELECT count(*) FROM sqlite_master").fetchone()  # schema or lock: fails once
    except sqlite3.Error:
        src.close()
        return tables
    unread = []
    try:
        for table in tables:
            try:
                if not _copy_table(src, dest, table)[1]:
                    unread.append(table)
            except sqlite3.DatabaseError:
                unread.append(table)
    finally:
        src.close()
    return unread


def _walk_pages(source: Path, dest: sqlite3.Connection, unread: list[str]) -> None:
    """The rows of `unread` tables that only a walk over the pages finds, added to `dest`."""
    tables = [t for t in tables_of(dest) if t.name in unread]
    try:
        found = walk(source, tables)
    except OSError:
        return
    restore(found, tables, dest)


def salvage(
    source: Path, dest: sqlite3.Connection, reason: str, *, timeout: float = 5.0, pages: bool = True
) -> Recovery:
    """Copy what can be read from `source` into the freshly migrated `dest`; with `pages`, walk the
    file's pages for the rows of tables SQLite could not read to their end. `timeout`: how long a
    lock held elsewhere is waited for."""
    tables = [r[0] for r in dest.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY rowid")]
    dest.execute("PRAGMA foreign_keys=OFF")  # a message may survive its conversation's row
    dest.execute("BEGIN IMMEDIATE")
    unread = _copy(source, dest, tables, timeout)
    complete = not unread
    if unread and pages:
        _walk_pages(source, dest, unread)
    # Messages whose conversation row was lost get a conversation, so their words stay reachable.
    dest.execute(
        "INSERT INTO conversations(id, title, created, updated) SELECT conversation_id, "
        "'Recovered messages', MIN(created), MAX(updated) FROM messages "
        "WHERE conversation_id NOT IN (SELECT id FROM conversations) GROUP BY conversation_id"
    )
    dest.execute(
        "UPDATE runs SET conversation_id=NULL WHERE conversation_id NOT IN (SELECT id FROM conversations)"
    )
    dest.execute("COMMIT")
    dest.execute("PRAGMA foreign_keys=ON")
    (conversations,) = dest.execute("SELECT count(*) FROM conversations").fetchone()
    (messages,) = dest.execute("SELECT count(*) FROM messages").fetchone()
    return Recovery(source, reason, int(conversations), int(messages), complete)
