"""A small key -> JSON cache in sqlite3, shared by model facts and compatibility verdicts.

Each call opens its own connection, so worker threads can use it freely.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from app.engine.library.damage import is_damage, move_aside
from app.engine.library.paths import store_path

SCHEMA = "CREATE TABLE IF NOT EXISTS cache (kind TEXT, key TEXT, value TEXT, PRIMARY KEY (kind, key))"
VERSION = "1"  # bump when a cached shape changes; old rows are then simply not found


class Store:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or store_path()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=10)
        try:
            conn.execute(SCHEMA)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                conn.close()
                raise
            # A damaged cache would refuse every later write; a fresh one only costs recomputing.
            move_aside(self.path)
            conn.close()
            conn = sqlite3.connect(self.path, timeout=10)
            conn.execute(SCHEMA)
        return conn

    def get(self, kind: str, key: str) -> Any | None:
        try:
            with self._connect() as conn:
                row = conn.execute(
                    "SELECT value FROM cache WHERE kind = ? AND key = ?", (kind, f"{VERSION}:{key}")
                ).fetchone()
        except sqlite3.Error:
            return None
        return json.loads(row[0]) if row else None

    def get_many(self, kind: str, keys: list[str]) -> dict[str, Any]:
        """One query for many keys: listing a large library must stay fast."""
        out: dict[str, Any] = {}
        try:
            with self._connect() as conn:
                for i in range(0, len(keys), 500):
                    chunk = [f"{VERSION}:{k}" for k in keys[i : i + 500]]
                    marks = ",".join("?" * len(chunk))
                    for key, value in conn.execute(
                        f"SELECT key, value FROM cache WHERE kind = ? AND key IN ({marks})", (kind, *chunk)
                    ):
                        out[key.split(":", 1)[1]] = json.loads(value)
        except sqlite3.Error:
            return {}
        return out

    def put(self, kind: str, key: str, value: Any) -> None:
        try:
            with self._connect() as conn:
                conn.execute(
                    "INSERT OR REPLACE INTO cache (kind, key, value) VALUES (?, ?, ?)",
                    (kind, f"{VERSION}:{key}", json.dumps(value)),
                )
        except sqlite3.Error:
            pass  # a cache that cannot be written only costs time
