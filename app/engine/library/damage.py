"""A damaged SQLite file is moved aside, never deleted, so a fresh one can take its place."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

# SQLITE_CORRUPT and SQLITE_NOTADB: the file itself is damaged, unlike a lock or a full disk.
DAMAGE_CODES = (11, 26)
COMPANIONS = ("-wal", "-shm")


def is_damage(exc: sqlite3.Error) -> bool:
    return int(getattr(exc, "sqlite_errorcode", 0)) & 0xFF in DAMAGE_CODES


def move_aside(path: Path) -> Path:
    """Rename the file and its WAL companions to `<name>.damaged-<stamp>`; returns the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target, n = path.with_name(f"{path.name}.damaged-{stamp}"), 1
    while any(Path(f"{target}{s}").exists() for s in ("", *COMPANIONS)):
        target, n = path.with_name(f"{path.name}.damaged-{stamp}-{n}"), n + 1
    # Companions first: a WAL left beside a fresh file would be replayed into it.
    for suffix in (*COMPANIONS, ""):
        if Path(f"{path}{suffix}").exists():
            Path(f"{path}{suffix}").rename(f"{target}{suffix}")
    return target
