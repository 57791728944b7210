"""Conversations on disk: SQLite in WAL mode, so a killed app loses at most the last checkpoint.

Every write is its own committed transaction; WAL keeps the file consistent whatever moment the
process dies at. The schema carries a version (`PRAGMA user_version`) and migrations run in order
on open. Listing never parses per-message JSON, so one damaged conversation cannot hide the
others; loading a damaged one degrades field by field instead of raising. Messages come and go
as the transcript's typed records; stats keep the JSON keys of the first schema, so old rows load.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.engine.decoding.text.clean import clean_text
from app.engine.library.paths import app_data_dir
from app.engine.store.connection import LOCK_WAIT_S, StoreFile
from app.engine.store.provenance import Answer
from app.engine.store.schema import MIGRATIONS as MIGRATIONS  # re-exported: tests migrate by hand
from app.engine.store.schema import SCHEMA_VERSION as SCHEMA_VERSION
from app.engine.store.transcript import AnswerStats, AnswerTurn, MessageState, Role, Turn, UserTurn

log = logging.getLogger(__name__)


def default_db_path() -> Path:
    return app_data_dir() / "conversations.sqlite3"


class ConversationError(Exception):
    """A conversation could not be read; the others are unaffected."""


@dataclass(frozen=True, slots=True)
class Summary:
    id: int
    title: str
    updated: float


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    position: int
    role: Role
    content: str
    state: MessageState = MessageState.COMPLETE
    tokens: str = ""  # encoded token spans (app.engine.store.provenance)
    rejected: tuple[tuple[int, str], ...] = ()  # (token index it preceded, text)
    stats: AnswerStats = field(default_factory=AnswerStats)
    damaged: bool = False  # some field could not be read and was dropped

    def turn(self) -> Turn:
        if self.role is Role.USER:
            return UserTurn(self.id, self.content)
        answer = Answer.decode(self.content, self.tokens, self.rejected)
        return AnswerTurn(self.id, answer, self.state, self.stats, settled=len(answer.parts))


@dataclass(frozen=True, slots=True)
class Conversation:
    id: int
    title: str
    system_prompt: str
    settings: dict[str, Any]
    messages: tuple[StoredMessage, ...]
    damaged: bool = False

    def turns(self) -> list[Turn]:
        return [m.turn() for m in self.messages]


def _row_id(cursor: sqlite3.Cursor) -> int:
    assert cursor.lastrowid is not None  # an INSERT always sets it
    return cursor.lastrowid


def _clean_rejected(rejected: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """The refused drafts with `clean_text` applied, found in one pass when none needs it, the
    usual case: an answer's refused drafts are all saved again at each checkpoint as it streams."""
    joined = "".join(t for _, t in rejected)
    if clean_text(joined) == joined:
        return list(rejected)
    return [(i, clean_text(t)) for i, t in rejected]


def _json(raw: object, default: Any) -> tuple[Any, bool]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else default
        return (value, False) if isinstance(value, type(default)) else (default, True)
    except (ValueError, TypeError):
        return default, True


class ConversationStore(StoreFile):
    """Conversations and their messages, through the file's one connection (the UI thread's)."""

    def __init__(
        self, path: Path | str | None = None, *, timeout: float = 5.0, lock_wait: float = LOCK_WAIT_S
    ) -> None:
        super().__init__(Path(path) if path is not None else default_db_path(), timeout, lock_wait)

    # -- conversations ------------------------------------------------------------------------
    def create(
        self, title: str = "New chat", system_prompt: str = "", settings: dict[str, Any] | None = None
    ) -> int:
        now = time.time()
        cur = self.db.execute(
            "INSERT INTO conversations(title, created, updated, system_prompt, settings) VALUES (?,?,?,?,?)",
            (clean_text(title), now, now, clean_text(system_prompt), json.dumps(settings or {})),
        )
        return _row_id(cur)

    def list(self, search: str = "") -> list[Summary]:
        """Newest first; `search` matches titles and message text (case-insensitive)."""
        if search:
            like = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            rows = self.db.execute(
                "SELECT id, title, updated FROM conversations c WHERE title LIKE ? ESCAPE '\\' OR EXISTS "
                "(SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.content LIKE ? ESCAPE '\\') "
                "ORDER BY updated DESC, id DESC",
                (like, like),
            )
        else:
            rows = self.db.execute(
                "SELECT id, title, updated FROM conversations ORDER BY updated DESC, id DESC"
            )
        return [Summary(int(i), str(t), float(u or 0)) for i, t, u in rows]

    def title(self, conversation_id: int) -> str | None:
        row = self.db.execute("SELECT title FROM conversations WHERE id=?", (conversation_id,)).fetchone()
        return str(row[0]) if row else None

    def rename(self, conversation_id: int, title: str) -> None:
        self.db.execute("UPDATE conversations SET title=? WHERE id=?", (clean_text(title), conversation_id))

    def delete(self, conversation_id: int) -> None:
        self.db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))

    def set_system_prompt(self, conversation_id: int, prompt: str) -> None:
        self.db.execute(
            "UPDATE conversations SET system_prompt=? WHERE id=?", (clean_text(prompt), conversation_id)
        )

    def set_settings(self, conversation_id: int, settings: dict[str, Any]) -> None:
        self.db.execute(
            "UPDATE conversations SET settings=? WHERE id=?", (json.dumps(settings), conversation_id)
        )

    def load(self, conversation_id: int) -> Conversation:
        """Raises ConversationError only when the conversation row itself cannot be read."""
        try:
            row = self.db.execute(
                "SELECT title, system_prompt, settings FROM conversations WHERE id=?", (conversation_id,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise ConversationError(f"conversation {conversation_id} could not be read: {exc}") from exc
        if row is None:
            raise ConversationError(f"conversation {conversation_id} does not exist")
        settings, bad = _json(row[2], {})
        messages: list[StoredMessage] = []
        try:
            rows = self.db.execute(
                "SELECT id, position, role, content, state, tokens, rejected, stats FROM messages "
                "WHERE conversation_id=? ORDER BY position",
                (conversation_id,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise ConversationError(
                f"messages of conversation {conversation_id} could not be read: {exc}"
            ) from exc
        for mid, pos, role, content, state, tokens, rejected, stats in rows:
            messages.append(self._message(mid, pos, role, content, state, tokens, rejected, stats))
        damaged = bad or any(m.damaged for m in messages)
        return Conversation(
            conversation_id, str(row[0]), str(row[1] or ""), settings, tuple(messages), damaged
        )

    @staticmethod
    def _message(
        mid: int, pos: int, role: str, content: str, state: str, tokens: str, rejected: str, stats: str
    ) -> StoredMessage:
        """Stats stored as JSON become typed here; a value of the wrong type keeps its default."""
        stats_json, bad_json = _json(stats, {})
        typed_stats, bad_stats = AnswerStats.from_json(stats_json)
        rejected_value, bad_rejected = _json(rejected, [])
        pairs: list[tuple[int, str]] = []
        try:
            pairs = [(int(i), clean_text(str(t))) for i, t in rejected_value]
        except (TypeError, ValueError):
            bad_rejected = True
        return StoredMessage(
            int(mid),
            int(pos),
            Role.USER if role == Role.USER else Role.ASSISTANT,
            clean_text(str(content or "")),
            MessageState.read(state or MessageState.COMPLETE),
            str(tokens or ""),
            tuple(pairs),
            typed_stats,
            bad_json or bad_stats or bad_rejected,
        )

    # -- messages -----------------------------------------------------------------------------
    def append(
        self,
        conversation_id: int,
        role: Role,
        content: str,
        state: MessageState = MessageState.COMPLETE,
    ) -> int:
        """Add a message after the last one and commit it (with the enclosing transaction, if any)."""
        return self.append_text(conversation_id, role, content, state)[0]

    def append_text(
        self,
        conversation_id: int,
        role: Role,
        content: str,
        state: MessageState = MessageState.COMPLETE,
    ) -> tuple[int, str]:
        """As `append`, also returning the text as written (cleaned), for the transcript to show."""
        now, content = time.time(), clean_text(content)
        with self.transaction():
            (last,) = self.db.execute(
                "SELECT COALESCE(MAX(position), -1) FROM messages WHERE conversation_id=?", (conversation_id,)
            ).fetchone()
            cur = self.db.execute(
                "INSERT INTO messages(conversation_id, position, role, content, state, created, updated) "
                "VALUES (?,?,?,?,?,?,?)",
                (conversation_id, last + 1, role.value, content, state.value, now, now),
            )
            self.db.execute("UPDATE conversations SET updated=? WHERE id=?", (now, conversation_id))
        return _row_id(cur), content

    def checkpoint(
        self,
        message_id: int,
        content: str,
        *,
        state: MessageState,
        tokens: str = "",
        rejected: Sequence[tuple[int, str]] = (),
        stats: AnswerStats | None = None,
    ) -> None:
        """Overwrite one message's text and metadata in a single committed transaction."""
        self.db.execute(
            "UPDATE messages SET content=?, state=?, tokens=?, rejected=?, stats=?, updated=? WHERE id=?",
            (
                clean_text(content),
                state.value,
                tokens,
                json.dumps(_clean_rejected(rejected)),  # a pair is written as a list
                json.dumps(stats.to_json() if stats is not None else {}),
                time.time(),
                message_id,
            ),
        )

    def save_answer(self, turn: AnswerTurn) -> None:
        a = turn.answer
        self.checkpoint(
            turn.key, a.text, state=turn.state, tokens=a.encoded(), rejected=a.rejected, stats=turn.stats
        )

    def edit(self, message_id: int, content: str) -> str:
        """Replace one message's text; returns the text as written (cleaned)."""
        content = clean_text(content)
        self.db.execute(
            "UPDATE messages SET content=?, updated=? WHERE id=?", (content, time.time(), message_id)
        )
        return content

    def truncate_after_message(self, conversation_id: int, message_id: int) -> None:
        """Delete every message after the message `message_id`, found by its stored position (not
        by its place on screen, which a conversation with damaged rows may not share)."""
        self.db.execute(
            "DELETE FROM messages WHERE conversation_id=? AND position>"
            "(SELECT position FROM messages WHERE id=? AND conversation_id=?)",
            (conversation_id, message_id, conversation_id),
        )

    # -- export -------------------------------------------------------------------------------
    def export_markdown(self, conversation_id: int) -> str:
        c = self.load(conversation_id)
        parts = [f"# {c.title}", ""]
        if c.system_prompt:
            parts += ["## System", "", c.system_prompt, ""]
        for m in c.messages:
            note = "" if m.state is MessageState.COMPLETE else f" ({m.state})"
            parts += [f"## {m.role.capitalize()}{note}", "", m.content, ""]
        return "\n".join(parts)

    def export_json(self, conversation_id: int) -> str:
        c = self.load(conversation_id)
        data = {
            "format": "specchat-conversation",
            "version": 1,
            "title": c.title,
            "system_prompt": c.system_prompt,
            "settings": c.settings,
            "messages": [
                {
                    "role": m.role.value,
                    "content": m.content,
                    "state": m.state.value,
                    "stats": m.stats.to_json(),
                    "rejected_drafts": [list(r) for r in m.rejected],
                }
                for m in c.messages
            ],
        }
        return json.dumps(data, ensure_ascii=False, indent=2)
