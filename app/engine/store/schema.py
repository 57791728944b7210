"""The conversations schema: migrations run in order on open, each in its own transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable


def _script(db: sqlite3.Connection, sql: str) -> None:
    """Statement by statement: executescript would commit the migration's open transaction."""
    for statement in sql.split(";"):
        if statement.strip():
            db.execute(statement)


def _v1(db: sqlite3.Connection) -> None:
    _script(
        db,
        """
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            title TEXT NOT NULL,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            system_prompt TEXT NOT NULL DEFAULT '',
            settings TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL DEFAULT 'complete',
            created REAL NOT NULL,
            updated REAL NOT NULL,
            UNIQUE (conversation_id, position)
        );
        """,
    )


def _v2(db: sqlite3.Connection) -> None:
    """Per-token provenance spans, rejected drafts and stats travel with each message."""
    _script(
        db,
        """
        ALTER TABLE messages ADD COLUMN tokens TEXT NOT NULL DEFAULT '';
        ALTER TABLE messages ADD COLUMN rejected TEXT NOT NULL DEFAULT '[]';
        ALTER TABLE messages ADD COLUMN stats TEXT NOT NULL DEFAULT '{}';
        CREATE INDEX messages_by_conversation ON messages(conversation_id, position);
        """,
    )


def _v3(db: sqlite3.Connection) -> None:
    """One row per finished answer for the speedup history (app.engine.store.history).

    Deleting a conversation deletes its rows; regenerating an answer keeps the old one's row, a
    measurement that happened. `speedup` stays NULL until the plain speed at `bucket` is known.
    """
    _script(
        db,
        """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER REFERENCES conversations(id) ON DELETE CASCADE,
            message_id INTEGER,
            created REAL NOT NULL,
            main TEXT NOT NULL,
            draft TEXT NOT NULL DEFAULT '',
            mode TEXT NOT NULL,
            kind TEXT NOT NULL,
            temperature REAL NOT NULL DEFAULT 0,
            context_tokens INTEGER NOT NULL,
            bucket INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            tok_s REAL NOT NULL,
            plain_tok_s REAL,
            speedup REAL,
            proposed INTEGER NOT NULL DEFAULT 0,
            accepted INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL DEFAULT 'complete'
        );
        CREATE INDEX runs_by_pair ON runs(main, draft, created);
        """,
    )


def _v4(db: sqlite3.Connection) -> None:
    """The composer's unsent text per conversation (app.engine.store.drafts); 0 is the new chat,
    which has no row yet, so a trigger rather than a foreign key drops a deleted one's draft."""
    db.execute(
        "CREATE TABLE drafts (conversation_id INTEGER PRIMARY KEY, text TEXT NOT NULL, updated REAL NOT NULL)"
    )
    db.execute(  # one statement: its body's semicolon would split it in _script
        "CREATE TRIGGER drafts_follow_conversations AFTER DELETE ON conversations "
        "BEGIN DELETE FROM drafts WHERE conversation_id = old.id; END"
    )


def _v5(db: sqlite3.Connection) -> None:
    """Each run's drafting rounds, so the history shows accepted tokens per round as the answer
    did; NULL for runs stored before (they are left out of that figure)."""
    db.execute("ALTER TABLE runs ADD COLUMN drafting_rounds INTEGER")


def _v6(db: sqlite3.Connection) -> None:
    """Each run's machine load and its plain speed's range: a plain speed measured later is
    given only to runs made under the same conditions, and with how sure it is. NULL for runs
    stored before (no plain speed measured later is given to them)."""
    _script(
        db,
        """
        ALTER TABLE runs ADD COLUMN load REAL;
        ALTER TABLE runs ADD COLUMN plain_low REAL;
        ALTER TABLE runs ADD COLUMN plain_high REAL;
        """,
    )


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2, _v3, _v4, _v5, _v6)
SCHEMA_VERSION = len(MIGRATIONS)
