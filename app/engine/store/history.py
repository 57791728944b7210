"""Speedup history per model pair, across conversations: rows in the conversations database.

Every finished answer leaves one `Run` (the `runs` table, schema v3; v5 added its drafting
rounds). Its numbers are the answer's own record (app.engine.features.figures), so one answer
reads the same here as under it. The history view and the exported report group them by pair,
prompt kind and temperature. Speedups are ratios, so they are averaged geometrically; acceptance
and accepted per round are pooled (accepted over proposed, over drafting rounds, across answers).
Plain answers are stored too (they are the baseline's evidence) but are not a pair's speedup.
"""

from __future__ import annotations

import csv
import io
import math
import sqlite3
from dataclasses import astuple, dataclass, fields, replace
from pathlib import Path
from typing import Any

from app.engine.store.conversations import ConversationStore
from app.engine.store.transcript import MessageState

MIN_TOKENS = 8  # shorter answers give no meaningful rate and are not recorded (figures' MIN_TIMED_TOKENS)
LOOKUP = "lookup"  # the draft column for prompt lookup without a draft model


@dataclass(frozen=True, slots=True)
class Run:
    """One answer's measured speed, with what it is grouped by."""

    main: str
    draft: str  # a draft model, LOOKUP, or "" for plain decoding
    mode: str
    kind: str
    temperature: float
    context_tokens: int
    bucket: int
    tokens: int
    tok_s: float
    plain_tok_s: float | None
    speedup: float | None
    proposed: int
    accepted: int
    state: MessageState = MessageState.COMPLETE
    created: float = 0.0
    conversation_id: int | None = None
    message_id: int | None = None
    drafting_rounds: int | None = None  # rounds that proposed something; None: stored before v5
    load: float | None = None  # the machine's 1-minute load average at the end; None: before v6
    plain_low: float | None = None  # the range plain's speed is in (9 times in 10)
    plain_high: float | None = None


_COLUMNS = tuple(f.name for f in fields(Run))


@dataclass(frozen=True, slots=True)
class PlainSpeed:
    """A plain speed measured under some conditions, and how near a run's must be to share it."""

    tok_s: float
    low: float
    high: float
    load: float | None  # the 1-minute load average it was measured at; None where there is none
    when: float  # time.time()
    within_seconds: float
    within_load: float


def _read_run(row: tuple[Any, ...]) -> Run:
    """A row of the columns of `Run`, in order; its state becomes the enum."""
    run = Run(*row)
    return replace(run, state=MessageState.read(run.state))


def _name(path: str) -> str:
    return Path(path.rstrip("/")).name or path


def pair_label(main: str, draft: str) -> str:
    return f"{_name(main)} + {'prompt lookup' if draft == LOOKUP else _name(draft) if draft else 'plain'}"


def temperature_label(t: float) -> str:
    return "greedy" if t <= 0 else f"T={t:.1f}"


class RunHistory:
    """Reads and writes the `runs` table through the store's connection (the UI thread's)."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    @property
    def db(self) -> sqlite3.Connection:
        """The store's connection now: a retry at start may replace its read-only stand-in."""
        return self.store.db

    def record(self, run: Run) -> int | None:
        """Store one answer; None (nothing stored) when it was too short to time."""
        if run.tokens < MIN_TOKENS or run.tok_s <= 0:
            return None
        cur = self.db.execute(
            f"INSERT INTO runs({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})", astuple(run)
        )
        return cur.lastrowid

    def fill_baseline(self, main: str, bucket: int, plain: PlainSpeed) -> int:
        """Give speculative runs waiting for this bucket's plain speed their speedup: only those
        made under the conditions it was measured under (near in time, at a like load); older
        runs keep none rather than one against a machine in another state."""
        if plain.tok_s <= 0:
            return 0
        same_load = "load IS NULL" if plain.load is None else "ABS(load - ?) < ?"
        load_args = () if plain.load is None else (plain.load, plain.within_load)
        cur = self.db.execute(
            "UPDATE runs SET plain_tok_s=?, plain_low=?, plain_high=?, speedup=tok_s/? "
            "WHERE main=? AND bucket=? AND speedup IS NULL AND mode!='off' "
            f"AND ABS(created - ?) <= ? AND {same_load}",
            (
                plain.tok_s,
                plain.low,
                plain.high,
                plain.tok_s,
                main,
                bucket,
                plain.when,
                plain.within_seconds,
                *load_args,
            ),
        )
        return cur.rowcount

    def runs(self, main: str | None = None, draft: str | None = None) -> list[Run]:
        """Oldest first, optionally for one main model and one draft."""
        where, args = [], []
        for column, value in (("main", main), ("draft", draft)):
            if value is not None:
                where.append(f"{column}=?")
                args.append(value)
        sql = f"SELECT {', '.join(_COLUMNS)} FROM runs" + (f" WHERE {' AND '.join(where)}" if where else "")
        rows = self.db.execute(sql + " ORDER BY created, id", args)
        return [_read_run(row) for row in rows]

    def plain_speeds(self, conversation_id: int) -> dict[int, tuple[float, tuple[float, float] | None]]:
        """message id -> the plain speed its run was compared with and that speed's range, for one
        conversation's answers (filled in when it was measured after the answer)."""
        rows = self.db.execute(
            "SELECT message_id, plain_tok_s, plain_low, plain_high FROM runs WHERE conversation_id=? "
            "AND message_id IS NOT NULL AND plain_tok_s IS NOT NULL AND mode!='off'",
            (conversation_id,),
        )
        return {
            int(m): (float(p), (float(lo), float(hi)) if lo is not None and hi is not None else None)
            for m, p, lo, hi in rows
        }

    def pairs(self) -> list[tuple[str, str]]:
        """Speculative pairs that have history, most recently used first."""
        rows = self.db.execute(
            "SELECT main, draft FROM runs WHERE mode!='off' GROUP BY main, draft ORDER BY MAX(created) DESC"
        )
        return [(str(m), str(d)) for m, d in rows]


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """One group of answers: a pair, a prompt kind, a temperature."""

    main: str
    draft: str
    kind: str
    temperature: float
    answers: int
    speedup: float | None  # geometric mean over the answers whose plain speed is known
    measured: int  # how many answers that is
    acceptance: float | None  # pooled: accepted over proposed
    tok_s: float
    accepted_per_round: float | None = None  # pooled over the answers whose drafting rounds are known


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def aggregate(runs: list[Run]) -> list[HistoryRow]:
    """Speculative runs grouped by (main, draft, kind, temperature to one decimal), sorted."""
    groups: dict[tuple[str, str, str, float], list[Run]] = {}
    for r in runs:
        if r.mode != "off":
            groups.setdefault((r.main, r.draft, r.kind, round(r.temperature, 1)), []).append(r)
    out = []
    for (main, draft, kind, temp), rs in sorted(groups.items()):
        proposed = sum(r.proposed for r in rs)
        speedups = [r.speedup for r in rs if r.speedup]
        counted = [r for r in rs if r.drafting_rounds]
        drafting = sum(r.drafting_rounds or 0 for r in counted)
        out.append(
            HistoryRow(
                main,
                draft,
                kind,
                temp,
                len(rs),
                _geomean(speedups),
                len(speedups),
                sum(r.accepted for r in rs) / proposed if proposed else None,
                sum(r.tok_s for r in rs) / len(rs),
                sum(r.accepted for r in counted) / drafting if drafting else None,
            )
        )
    return out


def speedup_series(runs: list[Run]) -> list[tuple[float, float]]:
    """(answer number from 1, speedup) in time order, for answers whose speedup is known."""
    known = [r for r in sorted(runs, key=lambda r: r.created) if r.mode != "off" and r.speedup]
    return [(float(i + 1), float(r.speedup or 0)) for i, r in enumerate(known)]


def _fmt(value: float | None, fmt: str) -> str:
    return "—" if value is None else fmt.format(value)


def history_markdown(rows: list[HistoryRow]) -> str:
    """The history table as a Markdown section."""
    lines = ["## History by pair, prompt kind and temperature", ""]
    if not rows:
        return "\n".join(lines + ["No answers recorded yet.", ""])
    lines += [
        "| pair | kind | temperature | answers | speedup | acceptance | accepted per round | tok/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {pair_label(r.main, r.draft)} | {r.kind} | {temperature_label(r.temperature)} | {r.answers} | "
        f"{_fmt(r.speedup, '{:.2f}×')} | {_fmt(r.acceptance, '{:.0%}')} | "
        f"{_fmt(r.accepted_per_round, '{:.2f}')} | {r.tok_s:.1f} |"
        for r in rows
    ]
    return "\n".join(lines + [""])


def history_csv(runs: list[Run]) -> str:
    """Every stored run, one row each, with the columns of `Run`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_COLUMNS)
    writer.writerows(astuple(r) for r in runs)
    return out.getvalue()


def export_history(folder: Path, runs: list[Run], chart_png: bytes | None = None) -> str:
    """Write history.csv (and the speedup chart) into `folder`; returns the report's section."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "history.csv").write_text(history_csv(runs), encoding="utf-8")
    section = history_markdown(aggregate(runs))
    if chart_png:
        (folder / "history-speedup.png").write_bytes(chart_png)
        section += "\n![Speedup per answer over time](history-speedup.png)\n"
    return section + "\nEvery answer's numbers: [history.csv](history.csv)\n"
