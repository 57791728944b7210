"""A database written before the typed transcript opens with its answers' stats typed."""

from __future__ import annotations

import json

from app.engine.decoding.events import Provenance
from app.engine.store.conversations import SCHEMA_VERSION, ConversationStore
from app.engine.store.transcript import AnswerTurn, LosslessVerdict, MessageState, Role, UserTurn, Verdict
from tests.engine.store.schema_v3 import ANSWER, STATS, write_v3_database


def test_a_schema_v3_database_loads_with_typed_stats_and_provenance(tmp_path):
    path = tmp_path / "v3.sqlite3"
    write_v3_database(path)
    store = ConversationStore(path)
    assert store.schema_version == SCHEMA_VERSION
    c = store.load(1)
    assert not c.damaged, "an old database is read without damage"
    assert c.system_prompt == "Be brief.", "its system prompt is kept"
    user, answer = c.messages
    assert (user.role, answer.role, answer.state) == (Role.USER, Role.ASSISTANT, MessageState.COMPLETE)
    s = answer.stats
    assert (s.tokens, s.tokens_per_second, s.first_token_seconds, s.speedup) == (4, 41.27, 0.0831, 2.013)
    assert (s.proposed, s.accepted, s.acceptance, s.mean_accepted, s.k) == (6, 3, 0.5, 1.5, 3)
    assert (s.mode, s.finish_reason, s.prompt_tokens, s.plain_tokens_per_second) == (
        "adaptive",
        "stop",
        18,
        20.5,
    )
    assert s.main == "/models/Qwen2.5-1.5B-Instruct" and s.temperature == 0.0
    assert s.token_ids == (9707, 11, 21340, 13) and s.draft_rarely_right is None
    assert s.lossless == LosslessVerdict(
        Verdict.IDENTICAL, "Identical to plain greedy decoding (4 tokens).", compared=4
    )

    question, turn = c.turns()
    assert isinstance(question, UserTurn) and question.text == "What do otters do?"
    assert isinstance(turn, AnswerTurn), "the second turn is an answer"
    assert turn.text == ANSWER, "the answer's text is kept"
    assert turn.stats == s, "the answer's stats are kept"
    assert turn.answer.parts == ["Otters", " ", "hold ", "hands."]
    assert turn.answer.provenance == [Provenance.MAIN, Provenance.DRAFT, Provenance.DRAFT, Provenance.MAIN]
    assert turn.answer.rejected == [(2, " swim")]


def test_saving_a_loaded_answer_keeps_the_stored_format(tmp_path):
    """Rows written now read the same in the version before: the same keys, unset stats left out."""
    path = tmp_path / "v3.sqlite3"
    write_v3_database(path)
    store = ConversationStore(path)
    turn = store.load(1).turns()[1]
    assert isinstance(turn, AnswerTurn)
    store.save_answer(turn)
    (raw,) = store.db.execute("SELECT stats FROM messages WHERE position=1").fetchone()
    assert json.loads(raw) == {k: v for k, v in STATS.items() if v is not None}
    again = store.load(1).messages[1]
    assert again.stats == turn.stats, "the stats read back as saved"
    assert again.tokens == turn.answer.encoded(), "the tokens read back as saved"


def test_unreadable_stat_values_keep_their_defaults_and_mark_the_conversation(tmp_path):
    path = tmp_path / "v3.sqlite3"
    write_v3_database(path)
    store = ConversationStore(path)
    bad = {**STATS, "tok_s": "fast", "token_ids": [1, "x"], "lossless": {"verdict": "maybe", "message": "?"}}
    store.db.execute("UPDATE messages SET stats=? WHERE position=1", (json.dumps(bad),))
    c = store.load(1)
    s = c.messages[1].stats
    assert c.damaged, "unreadable stats mark the chat as damaged"
    assert s.tokens_per_second == 0.0, "an unreadable rate reads as 0"
    assert s.token_ids == (), "unreadable token ids read as none"
    assert s.lossless is None, "an unreadable verdict reads as none"
    assert s.tokens == 4 and s.speedup == 2.013  # the readable values survive
