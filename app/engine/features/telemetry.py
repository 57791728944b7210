"""The dashboard's numbers for one generation, from the engine's own events (no Qt).

Fed TokenEvents and RoundEvents in arrival order, it keeps the series the charts draw: tok/s
over engine time, acceptance by draft position, accepted tokens per round, k over time, and the
oracle's best fixed k. Rates use TokenEvent.time, never when the UI got round to painting. The
same rows export as CSV, and a summary as a Markdown report, so a run can be shared.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from app.engine.decoding.events import RoundEvent, TokenEvent
from app.engine.features.figures import (
    AnswerFigures,
    answer_figures,
    per_round_text,
    percent_text,
    speed_text,
    speedup_text,
    stream_rate,
)
from app.engine.policy.oracle import Oracle, RoundRecord, Tally

RATE_WINDOW_S = 1.0  # tok/s is averaged over the last second of engine time
# one rate point per this much engine time, the newest within it kept: a point per token kept
# ~0.1 KB per token of a fast answer for a chart a few hundred pixels wide
RATE_POINT_S = 0.01
CSV_FIELDS = (
    "round",
    "time",
    "k",
    "source",
    "accepted",
    "emitted",
    "draft_seconds",
    "verify_seconds",
    "wall_seconds",
    "bypassed",
    "policy_k",
    "expected_speedup",
)


@dataclass(frozen=True, slots=True)
class RoundRow:
    """One round as exported: what was proposed, kept, and what it cost."""

    round: int
    time: float  # engine time of the round's last token
    k: int
    source: str
    accepted: int
    emitted: int
    draft_seconds: float
    verify_seconds: float
    wall_seconds: float  # since the previous round's last token; 0 for the first
    bypassed: bool
    policy_k: int
    expected_speedup: float | None


@dataclass(frozen=True, slots=True)
class Summary:
    """What the report's header says about a generation."""

    tokens: int
    rounds: int
    seconds: float
    tok_s: float
    plain_tok_s: float | None
    achieved_speedup: float | None  # measured tok/s over the plain baseline
    oracle_k: int | None
    oracle_speedup: float | None  # best fixed k, estimated from this run's acceptance and costs
    acceptance: float  # accepted over proposed
    mean_accepted: float  # accepted drafts per drafting round
    figures: AnswerFigures | None = None  # the same numbers as every view shows them


@dataclass
class Telemetry:
    """Accumulates one generation; every series is a plain list the charts and tests can read."""

    plain_tok_s: float | None = None
    max_k: int = 8
    token_times: list[float] = field(default_factory=list)
    # (engine time, windowed tok/s), one point per RATE_POINT_S at most: the last token's is last
    tok_s: list[tuple[float, float]] = field(default_factory=list)
    k_series: list[tuple[int, int]] = field(default_factory=list)  # (round, k; 0 = plain step)
    rows: list[RoundRow] = field(default_factory=list)
    hits: list[int] = field(default_factory=list)
    trials: list[int] = field(default_factory=list)
    histogram: list[int] = field(default_factory=list)  # index: accepted drafts in a drafting round
    _tally: Tally = field(init=False, compare=False, repr=False)  # the oracle's sums, asked each batch
    # drafting rounds, their drafts, those kept, and those kept from the prompt: summed as rounds
    # come, since the dashboard asks for them every batch
    _drafting: int = 0
    _proposed: int = 0
    _accepted: int = 0
    _from_prompt: int = 0
    _last_round_time: float | None = None
    _window: int = 0  # first token inside the rate window, while token times never go back
    _in_order: bool = True
    _point_since: float = 0.0  # when the last rate point's stretch began

    def __post_init__(self) -> None:
        self._tally = Tally(self.max_k)

    def token(self, event: TokenEvent) -> None:
        t, times = event.time, self.token_times
        self._in_order = self._in_order and (not times or t >= times[-1])
        times.append(t)
        if self._in_order:  # the window only moves forward: a walk over it per token was quadratic
            lo = self._window
            while t - times[lo] > RATE_WINDOW_S:
                lo += 1
            self._window = lo
        else:
            lo = len(times) - 1
            while lo > 0 and t - times[lo - 1] <= RATE_WINDOW_S:
                lo -= 1
        span = t - times[lo]
        if span > 0:
            point = (t, (len(times) - 1 - lo) / span)
            if self.tok_s and 0 <= t - self._point_since < RATE_POINT_S:
                self.tok_s[-1] = point
            else:
                self.tok_s.append(point)
                self._point_since = t

    def round(self, event: RoundEvent) -> None:
        now = self.token_times[-1] if self.token_times else 0.0
        wall = now - self._last_round_time if self._last_round_time is not None else 0.0
        self._last_round_time = now
        decision = event.decision
        self.rows.append(
            RoundRow(
                event.index,
                now,
                event.k,
                event.source.value,
                event.accepted,
                len(event.emitted),
                event.draft_seconds,
                event.verify_seconds,
                wall,
                decision.bypassed,
                decision.k,
                decision.expected_speedup or None,
            )
        )
        self._tally.add(RoundRecord.of(event, wall))
        self.k_series.append((event.index, event.k))
        if event.k:
            self._drafting += 1
            self._proposed += event.k
            self._accepted += event.accepted
            self._from_prompt += event.accepted if event.source.value == "lookup" else 0
            self._grow(event.k)
            self.histogram[event.accepted] += 1
            for i in range(min(event.accepted + 1, event.k)):
                self.trials[i] += 1
                self.hits[i] += i < event.accepted

    def _grow(self, k: int) -> None:
        while len(self.trials) < k:
            self.trials.append(0)
            self.hits.append(0)
        while len(self.histogram) < k + 1:
            self.histogram.append(0)

    @property
    def acceptance_by_position(self) -> list[float]:
        """P(position i accepted | position i-1 was), for every position that was tried."""
        return [h / t if t else 0.0 for h, t in zip(self.hits, self.trials)]

    def oracle(self) -> Oracle | None:
        return self._tally.oracle()

    def figures(self) -> AnswerFigures:
        """This generation's numbers, by the definitions every view uses (app.engine.features.figures)."""
        times = self.token_times
        return answer_figures(
            tokens=len(times),
            tok_s=stream_rate(len(times), times[0] if times else None, times[-1] if times else 0.0),
            plain_tok_s=self.plain_tok_s,
            proposed=self._proposed,
            accepted=self._accepted,
            drafting_rounds=self._drafting,
            from_prompt=self._from_prompt,
        )

    def summary(self, figures: AnswerFigures | None = None) -> Summary:
        """`figures`: the answer's own numbers, when the caller has them (the chat's record of the
        answer); otherwise they are computed from the rounds seen here."""
        times = self.token_times
        span = times[-1] - times[0] if len(times) > 1 else 0.0
        f = figures or self.figures()
        o = self.oracle()
        return Summary(
            tokens=f.tokens,
            rounds=len(self.rows),
            seconds=span,
            tok_s=f.tok_s or 0.0,
            plain_tok_s=f.plain_tok_s,
            achieved_speedup=f.speedup,
            oracle_k=o.best_k if o else None,
            oracle_speedup=o.predicted_speedup if o else None,
            acceptance=f.acceptance or 0.0,
            mean_accepted=f.accepted_per_round or 0.0,
            figures=f,
        )

    def csv_text(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_FIELDS)
        for r in self.rows:
            writer.writerow([getattr(r, f) for f in CSV_FIELDS])
        return out.getvalue()


def _num(value: float | None, fmt: str = "{:.2f}", missing: str = "—") -> str:
    return missing if value is None else fmt.format(value)


def _ratio(value: float | None) -> str:
    return "—" if value is None else speedup_text(value)


def markdown_report(
    t: Telemetry,
    title: str = "Speculative decoding report",
    charts: dict[str, str] | None = None,
    appendix: str = "",
    figures: AnswerFigures | None = None,
) -> str:
    """A self-contained summary; `charts` maps a caption to a PNG path relative to the report;
    `appendix` is Markdown added at the end (the per-pair history); `figures`: the answer's own
    numbers, so the report says what the app showed."""
    s = t.summary(figures)
    lines = [
        f"# {title}",
        "",
        "| measure | value |",
        "|---|---|",
        f"| tokens | {s.tokens} |",
        f"| rounds | {s.rounds} |",
        f"| decode rate | {speed_text(s.tok_s)} |",
        f"| plain rate (baseline) | {speed_text(s.plain_tok_s) if s.plain_tok_s else 'not measured'} |",
        f"| achieved speedup (measured) | {_ratio(s.achieved_speedup)} |",
        f"| oracle: best fixed k (estimated) | {_num(s.oracle_k, '{}')} ({_ratio(s.oracle_speedup)}) |",
        f"| acceptance (guesses kept) | {percent_text(s.acceptance)} |",
        f"| accepted per drafting round | {per_round_text(s.mean_accepted)} |",
        "",
        "## Acceptance by draft position",
        "",
        "| position | accepted | tried | rate |",
        "|---|---|---|---|",
    ]
    lines += [f"| {i + 1} | {h} | {n} | {h / n:.0%} |" for i, (h, n) in enumerate(zip(t.hits, t.trials)) if n]
    lines += ["", "## Accepted drafts per round", "", "| accepted | rounds |", "|---|---|"]
    lines += [f"| {a} | {n} |" for a, n in enumerate(t.histogram)]
    for caption, path in (charts or {}).items():
        lines += ["", f"## {caption}", "", f"![{caption}]({path})"]
    if appendix:
        lines += ["", appendix.rstrip()]
    return "\n".join(lines) + "\n"


def export_report(
    t: Telemetry,
    folder: Path,
    charts: dict[str, bytes] | None = None,
    title: str = "Speculative decoding report",
    appendix: str = "",
    figures: AnswerFigures | None = None,
) -> Path:
    """Write report.md, rounds.csv and the given PNG charts (name -> bytes) into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    links: dict[str, str] = {}
    for name, data in (charts or {}).items():
        file = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-") + ".png"
        (folder / file).write_bytes(data)
        links[name] = file
    (folder / "rounds.csv").write_text(t.csv_text(), encoding="utf-8")
    report = folder / "report.md"
    report.write_text(markdown_report(t, title, links, appendix, figures), encoding="utf-8")
    return report
