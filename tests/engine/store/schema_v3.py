"""A conversations database exactly as SpecChat wrote it before the typed transcript: schema
version 3, with an answer's stats as the JSON object the chat controller stored (its live-stats
snapshot, the models and temperature that wrote it, its token ids and a losslessness verdict).

The SQL is copied from that code, not generated from today's, so a change to today's migrations
cannot hide a database that no longer opens.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

SCHEMA_V3 = """
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
ALTER TABLE messages ADD COLUMN tokens TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN rejected TEXT NOT NULL DEFAULT '[]';
ALTER TABLE messages ADD COLUMN stats TEXT NOT NULL DEFAULT '{}';
CREATE INDEX messages_by_conversation ON messages(conversation_id, position);
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
PRAGMA user_version=3;
"""

# what `{**LiveStats.snapshot(), **origin, "token_ids": ids}` plus a saved verdict looked like
STATS = {
    "tokens": 4,
    "tok_s": 41.27,
    "rounds": 2,
    "proposed": 6,
    "accepted": 3,
    "acceptance": 0.5,
    "mean_accepted": 1.5,
    "k": 3,
    "bypassed": False,
    "mode": "adaptive",
    "draft_rarely_right": None,
    "ttft_s": 0.0831,
    "plain_tok_s": 20.5,
    "speedup": 2.013,
    "reason": "stop",
    "prompt_tokens": 18,
    "reused_tokens": 0,
    "prefill_s": 0.0412,
    "decode_s": 0.0727,
    "main": "/models/Qwen2.5-1.5B-Instruct",
    "draft": "/models/Qwen2.5-0.5B-Instruct",
    "temperature": 0.0,
    "token_ids": [9707, 11, 21340, 13],
    "lossless": {
        "verdict": "identical",
        "message": "Identical to plain greedy decoding (4 tokens).",
        "position": None,
        "compared": 4,
        "top2_margin": None,
        "answer_gap": None,
    },
}
ANSWER = "Otters hold hands."
TOKENS = "6m0;1d0;5d1;6m1"  # "Otters" by the main model, " " and "hold " accepted drafts, "hands." main
REJECTED = [[2, " swim"]]


def write_v3_database(path: Path) -> None:
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_V3)
    db.execute(
        "INSERT INTO conversations(id, title, created, updated, system_prompt, settings) "
        "VALUES (1, 'Otters', 1.0, 2.0, 'Be brief.', '{\"temperature\": 0.0}')"
    )
    db.execute(
        "INSERT INTO messages(conversation_id, position, role, content, state, created, updated) "
        "VALUES (1, 0, 'user', 'What do otters do?', 'complete', 1.0, 1.0)"
    )
    db.execute(
        "INSERT INTO messages(conversation_id, position, role, content, state, created, updated, tokens, "
        "rejected, stats) VALUES (1, 1, 'assistant', ?, 'complete', 1.5, 2.0, ?, ?, ?)",
        (ANSWER, TOKENS, json.dumps(REJECTED), json.dumps(STATS)),
    )
    db.commit()
    db.close()
