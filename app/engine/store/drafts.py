"""The composer's unsent text, one draft per conversation, kept in the conversations database so
it survives a quit or a crash. The new chat (no conversation yet) keeps its draft under 0."""

from __future__ import annotations

import time

from app.engine.decoding.text.clean import clean_text
from app.engine.store.conversations import ConversationStore

NEW_CHAT = 0


def _key(conversation: int | None) -> int:
    return NEW_CHAT if conversation is None else conversation


class Drafts:
    """Reads and writes through the store's connection; each write is one statement, so atomic."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def get(self, conversation: int | None, limit: int | None = None) -> str:
        """At most `limit` characters: a draft saved by a version that kept more is read in the
        time its start takes. Read as bytes, since SQLite's text functions end a text at a NUL
        and the draft must come back exactly as typed."""
        if limit is None:
            row = self.store.db.execute(
                "SELECT text FROM drafts WHERE conversation_id=?", (_key(conversation),)
            ).fetchone()
            return str(row[0]) if row else ""
        row = self.store.db.execute(  # a character takes at most 4 bytes of UTF-8
            "SELECT substr(CAST(text AS BLOB), 1, ?) FROM drafts WHERE conversation_id=?",
            (4 * int(limit), _key(conversation)),
        ).fetchone()
        # a cut through the last character drops it; the limit then cuts by characters
        return bytes(row[0]).decode("utf-8", "ignore")[:limit] if row else ""

    def put(self, conversation: int | None, text: str) -> None:
        """An empty or blank text removes the draft."""
        if not text.strip():
            self.clear(conversation)
            return
        self.store.db.execute(
            "INSERT INTO drafts(conversation_id, text, updated) VALUES (?,?,?) "
            "ON CONFLICT(conversation_id) DO UPDATE SET text=excluded.text, updated=excluded.updated",
            (_key(conversation), clean_text(text), time.time()),
        )

    def clear(self, conversation: int | None) -> None:
        self.store.db.execute("DELETE FROM drafts WHERE conversation_id=?", (_key(conversation),))
