"""Speedup history: the v3 migration, recording, late baselines, and aggregation by pair/kind/temperature."""

from __future__ import annotations

import math
import sqlite3

import pytest

from app.engine.store.conversations import MIGRATIONS, SCHEMA_VERSION, ConversationStore
from app.engine.store.history import (
    LOOKUP,
    PlainSpeed,
    Run,
    RunHistory,
    aggregate,
    export_history,
    history_markdown,
    pair_label,
    speedup_series,
)


def run(
    main="m/7b",
    draft="d/0.5b",
    kind="code",
    t=0.0,
    tok_s=60.0,
    plain=30.0,
    proposed=40,
    accepted=30,
    mode="adaptive",
    tokens=100,
    created=1.0,
    bucket=256,
    cid=None,
    rounds=None,
    load=1.0,
) -> Run:
    return Run(
        main,
        draft,
        mode,
        kind,
        t,
        bucket + 10,
        bucket,
        tokens,
        tok_s,
        plain,
        tok_s / plain if plain else None,
        proposed,
        accepted,
        "complete",
        created,
        cid,
        drafting_rounds=rounds,
        load=load,
    )


def test_a_version_two_database_gains_the_runs_table_and_keeps_its_messages(tmp_path):
    path = tmp_path / "v2.sqlite3"
    db = sqlite3.connect(path)
    MIGRATIONS[0](db)
    MIGRATIONS[1](db)
    db.execute("PRAGMA user_version=2")
    db.execute("INSERT INTO conversations(title, created, updated) VALUES ('old', 0, 0)")
    db.execute(
        "INSERT INTO messages(conversation_id, position, role, content, created, updated, stats) "
        "VALUES (1,0,'assistant','hi',0,0,'{\"tok_s\": 5}')"
    )
    db.commit()
    db.close()
    s = ConversationStore(path)
    assert s.schema_version == SCHEMA_VERSION
    assert s.load(1).messages[0].stats.tokens_per_second == 5.0
    assert RunHistory(s).runs() == []
    RunHistory(s).record(run(cid=1))
    assert len(RunHistory(s).runs()) == 1
    s.close()


def test_records_fills_late_baselines_and_forgets_deleted_conversations(store):
    h = RunHistory(store)
    cid = store.create("chat")
    assert h.record(run(tokens=3)) is None  # too short to time
    waiting = h.record(run(plain=None, bucket=512, created=2.0, cid=cid))
    other_bucket = h.record(run(plain=None, bucket=256, created=3.0))
    plain = h.record(run(mode="off", draft="", plain=None, bucket=512, created=4.0))
    busier = h.record(run(plain=None, bucket=512, created=5.0, load=2.5))
    older = h.record(run(plain=None, bucket=512, created=2.0 - 3600))
    unknown = h.record(run(plain=None, bucket=512, created=6.0, load=None))
    assert None not in (waiting, other_bucket, plain, busier, older, unknown)
    measured = PlainSpeed(40.0, 36.0, 44.0, load=1.2, when=60.0, within_seconds=1800.0, within_load=1.0)
    assert h.fill_baseline("m/7b", 512, measured) == 1  # the plain run is evidence, not a speedup
    by_id = {r.created: r for r in h.runs()}
    assert by_id[2.0].speedup == pytest.approx(60.0 / 40.0), (
        "the waiting run's speedup comes from the plain rate"
    )
    assert by_id[2.0].plain_tok_s == 40.0, "the plain rate it was measured against is kept"
    assert (by_id[2.0].plain_low, by_id[2.0].plain_high) == (36.0, 44.0), "and the range it is sure of"
    assert by_id[3.0].speedup is None and by_id[4.0].speedup is None
    assert by_id[5.0].speedup is None, "a run made under a load 1 or more away gets no speedup from it"
    assert by_id[2.0 - 3600].speedup is None, "nor does a run made an hour before"
    assert by_id[6.0].speedup is None, "nor one whose load was not recorded"
    assert h.pairs() == [("m/7b", "d/0.5b")]
    store.delete(cid)
    assert [r.created for r in h.runs()] == [2.0 - 3600, 3.0, 4.0, 5.0, 6.0]


def test_aggregates_by_pair_kind_and_temperature(store):
    h = RunHistory(store)
    for r in [
        run(kind="code", tok_s=60, plain=30, proposed=40, accepted=30, created=1, rounds=10),  # 2.0×
        run(kind="code", tok_s=45, plain=30, proposed=60, accepted=30, created=2, rounds=20),  # 1.5×
        run(kind="code", tok_s=50, plain=None, proposed=10, accepted=10, created=3),  # speedup unknown yet
        run(kind="code", t=0.7, tok_s=33, plain=30, proposed=20, accepted=5, created=4),
        run(kind="prose", tok_s=36, plain=30, created=5),
        run(draft=LOOKUP, kind="code", tok_s=39, plain=30, created=6),
        run(mode="off", draft="", kind="code", tok_s=30, plain=None, proposed=0, accepted=0, created=7),
    ]:
        h.record(r)
    rows = aggregate(h.runs())
    keyed = {(r.draft, r.kind, r.temperature): r for r in rows}
    assert set(keyed) == {
        ("d/0.5b", "code", 0.0),
        ("d/0.5b", "code", 0.7),
        ("d/0.5b", "prose", 0.0),
        (LOOKUP, "code", 0.0),
    }
    greedy = keyed[("d/0.5b", "code", 0.0)]
    assert greedy.answers == 3, "all three greedy code answers are counted"
    assert greedy.measured == 2, "only the two with a plain rate are measured"
    assert greedy.speedup == pytest.approx(math.sqrt(2.0 * 1.5))  # geometric mean of the known ones
    assert greedy.acceptance == pytest.approx(70 / 110)  # pooled over all three
    assert greedy.tok_s == pytest.approx((60 + 45 + 50) / 3)
    assert greedy.accepted_per_round == pytest.approx(60 / 30)  # pooled over the runs that counted rounds
    assert keyed[("d/0.5b", "prose", 0.0)].accepted_per_round is None  # stored before rounds were counted
    assert keyed[("d/0.5b", "code", 0.7)].speedup == pytest.approx(1.1)
    assert keyed[(LOOKUP, "code", 0.0)].speedup == pytest.approx(1.3)
    assert speedup_series(h.runs("m/7b", "d/0.5b")) == [
        (1.0, 2.0),
        (2.0, 1.5),
        (3.0, pytest.approx(1.1)),
        (4.0, pytest.approx(1.2)),
    ]
    text = history_markdown(rows)
    assert "| 7b + 0.5b | code | greedy | 3 | 1.73× | 64% | 2.00 | 51.7 |" in text
    assert "| 7b + prompt lookup | code | greedy | 1 | 1.30× |" in text
    assert pair_label("m/7b", "") == "7b + plain"


def test_export_writes_every_run_and_the_section(store, tmp_path):
    h = RunHistory(store)
    h.record(run(created=1))
    h.record(run(mode="off", draft="", created=2))
    section = export_history(tmp_path / "out", h.runs(), b"\x89PNG fake")
    csv = (tmp_path / "out" / "history.csv").read_text().splitlines()
    assert csv[0].startswith("main,draft,mode,kind,temperature"), "the CSV starts with its header"
    assert len(csv) == 3, "the CSV has a row per run"
    assert "history-speedup.png" in section, "the report links the chart"
    assert (tmp_path / "out" / "history-speedup.png").exists(), "the chart file is written"
    assert "| 7b + 0.5b | code | greedy | 1 | 2.00× |" in section
