"""Healing a damaged conversations database: move it aside, never delete it, and copy out what
SQLite can still read, table by table and row by row, keeping every id."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

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


def _open_readonly(source: Path) -> sqlite3.Connection:
    wal = Path(f"{source}-wal")
    # Immutable skips locking and never creates companions; a WAL with frames needs the real mode.
    mode = "ro" if wal.exists() and wal.stat().st_size > 0 else "ro&immutable=1"
    src = sqlite3.connect(f"{source.resolve().as_uri()}?mode={mode}", uri=True, isolation_level=None)
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


def salvage(source: Path, dest: sqlite3.Connection, reason: str) -> Recovery:
    """Copy what can be read from `source` into the freshly migrated `dest`."""
    complete = True
    tables = [r[0] for r in dest.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY rowid")]
    dest.execute("PRAGMA foreign_keys=OFF")  # a message may survive its conversation's row
    dest.execute("BEGIN IMMEDIATE")
    try:
        src = _open_readonly(source)
        try:
            for table in tables:
                try:
                    complete = _copy_table(src, dest, table)[1] and complete
                except sqlite3.DatabaseError:
                    complete = False  # the schema itself cannot be read
        finally:
            src.close()
    except sqlite3.Error:
        complete = False
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
