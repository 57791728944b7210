"""What the adaptive controller learnt about a pair on this machine, kept across app sessions.

The controller lives as long as a loaded pair, so without this every session's first answer
would explore (drafting a few tokens whatever the draft was worth, then a plain step to price
the rest) and learn this machine's costs again from nothing: with a useless draft that first
answer is where adaptive loses most to plain. The worker
saves this state after every answer and restores it when the pair is loaded again, keyed by the
two models and the MLX device, so a new session starts where the last one ended.

What is kept: the draft's long-run acceptance record (each answer starts from it), prompt
lookup's estimates, the measured costs (verify passes by size, drafting by k, the round's
overhead, reading a skipped token), the link from the main's confidence to the draft's hits, and
how many rounds each source has played (which ends exploring) and how many of the draft's
proposals were judged (which ends rechecking it often), and plain decoding's price as the loop
queues it (without it a restored controller priced plain at a step timed alone and drafted where
the draft loses). Costs are kept as multiples of the plain step, so a machine that is faster or
slower today rescales them all as today's plain steps take over the reference's median (within
eight of them).
"""

from __future__ import annotations

import math
from typing import Any

from app.engine.decoding.events import Provenance
from app.engine.policy.adaptive import AdaptiveDraftLength
from app.engine.policy.costs import CostTable, RecentMedian
from app.engine.policy.estimates import AcceptanceCounts

STATE_VERSION = 1


def state_key(main: str, draft: str | None, device: str, mode: str) -> str:
    return "|".join((main, draft or "", device, mode))


def export_state(policy: AdaptiveDraftLength) -> dict[str, Any]:
    """A JSON-ready copy of what `policy` learnt (no references into it)."""
    return {
        "version": STATE_VERSION,
        "sources": [s.value for s in policy.sources],
        "record": _counts(policy.record),
        "acceptance": {
            s.value: _counts(c) for s, c in policy.acceptance.items() if s is not Provenance.DRAFT
        },
        "verify": {"plain": _median(policy.verify.plain), "by_n": _table(policy.verify)},
        "drafting": {s.value: _table(t) for s, t in policy.drafting.items()},
        "overhead": _median(policy.overhead),
        "catch_up_read": _median(policy.catch_up_read),
        "queued_plain": {**_median(policy.queued_plain.means), "rounds": policy.queued_plain.rounds},
        "link": {"hits": list(policy.link.hits), "trials": list(policy.link.trials)},
        "played": {s.value: n for s, n in policy.played.items()},
        "verdicts": [policy.prober.verdicts, policy.prober.verdict_hits],
    }


def restore_state(policy: AdaptiveDraftLength, state: Any) -> bool:
    """Load `state` into a fresh `policy`; False (and `policy` untouched) when it does not fit:
    another version, other sources, or anything malformed."""
    try:
        if state.get("version") != STATE_VERSION or state["sources"] != [s.value for s in policy.sources]:
            return False
        record = _read_counts(state["record"])
        acceptance = {Provenance(s): _read_counts(c) for s, c in state["acceptance"].items()}
        plain, verify = _read_median(state["verify"]["plain"]), _read_table(state["verify"]["by_n"])
        drafting = {Provenance(s): _read_table(t) for s, t in state["drafting"].items()}
        overhead, catch_up = _read_median(state["overhead"]), _read_median(state["catch_up_read"])
        link = [_floats(state["link"][key], len(policy.link.hits)) for key in ("hits", "trials")]
        if len(record[0]) != len(policy.record.hits) or any(
            len(c[0]) != len(record[0]) for c in acceptance.values()
        ):
            return False
        played = {Provenance(s): int(n) for s, n in state["played"].items()}
        if (
            set(played) != set(policy.sources)
            or any(n < 0 for n in played.values())
            or any(s not in policy.drafting for s in drafting)
        ):
            return False
        verdicts, verdict_hits = (int(n) for n in state.get("verdicts", (0, 0)))  # absent from older states
        queued = state.get("queued_plain", {"samples": [], "count": 0, "rounds": 0})  # so is this
        queued_means, queued_rounds = _read_median(queued), int(queued["rounds"])
        if not 0 <= verdict_hits <= verdicts or queued_rounds < 0:
            return False
    except (AttributeError, KeyError, TypeError, ValueError):
        return False
    policy.record.restore(*record)
    for source, counts in acceptance.items():
        if source in policy.acceptance:
            policy.acceptance[source].restore(*counts)
    _set_median(policy.verify.plain, plain)
    _set_table(policy.verify, verify)  # after the plain step it keeps size 1 against
    for source, table in drafting.items():
        _set_table(policy.drafting[source], table)
    _set_median(policy.overhead, overhead)
    _set_median(policy.catch_up_read, catch_up)
    _set_median(policy.queued_plain.means, queued_means)  # in plain steps, as the costs are
    policy.queued_plain.rounds = queued_rounds
    policy.link.restore(*link)
    policy.played.update(played)
    policy.prober.verdicts, policy.prober.verdict_hits = verdicts, verdict_hits
    return True


# -- the pieces, out and back in ------------------------------------------------------------------


def _counts(c: AcceptanceCounts) -> dict[str, list[float]]:
    return {"hits": list(c.hits), "trials": list(c.trials)}


def _median(m: RecentMedian) -> dict[str, Any]:
    return {"samples": list(m.samples), "count": m.count}


def _table(t: CostTable) -> dict[str, Any]:
    return {str(n): _median(m) for n, m in t.by_n.items()}


def _floats(values: Any, length: int | None = None) -> list[float]:
    out = [float(v) for v in values]
    if (length is not None and len(out) != length) or not all(math.isfinite(v) and v >= 0 for v in out):
        raise ValueError("not a list of non-negative numbers")
    return out


def _read_counts(raw: Any) -> tuple[list[float], list[float]]:
    hits, trials = _floats(raw["hits"]), _floats(raw["trials"])
    if len(hits) != len(trials):
        raise ValueError("hits and trials differ in length")
    return hits, trials


def _read_median(raw: Any) -> tuple[list[float], int]:
    samples, count = _floats(raw["samples"]), int(raw["count"])
    if count < len(samples):
        raise ValueError("fewer samples counted than kept")
    return samples, count


def _read_table(raw: Any) -> dict[int, tuple[list[float], int]]:
    table = {int(n): _read_median(m) for n, m in raw.items()}
    if any(n < 1 for n in table):
        raise ValueError("a pass over no tokens")
    return table


def _set_median(m: RecentMedian, state: tuple[list[float], int]) -> None:
    samples, count = state
    m.samples, m.count = samples[-m.window :], count
    m.refresh()


def _set_table(t: CostTable, table: dict[int, tuple[list[float], int]]) -> None:
    by_n = {}
    for n, state in table.items():
        by_n[n] = RecentMedian()
        _set_median(by_n[n], state)
    t.replace(by_n)
