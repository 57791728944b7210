"""gpu_bench's rows and summary, from made-up answers: what a shared host's drift and stalls do to them."""

from __future__ import annotations

from app.engine.features.timed_run import TimedRun
from app.engine.measure.gpu.report import format_summary, reduce_answers


def _answer(step: float, stall: float = 0.0) -> TimedRun:
    """Eleven tokens a step apart, one gap longer by `stall` seconds."""
    stamps = [i * step + (stall if i > 5 else 0.0) for i in range(11)]
    return TimedRun(ids=list(range(11)), stamps=stamps, start=-step)


def test_the_paired_median_drops_a_stalled_answer_the_ratio_keeps_it() -> None:
    plains = [_answer(0.010), _answer(0.012), _answer(0.010)]  # the host's step drifted in turn two
    mode = [_answer(0.008), _answer(0.0096), _answer(0.008, stall=0.1)]  # a stall in the third
    rows = [
        reduce_answers("p", "plain", plains, plains, 0.010),
        reduce_answers("p", "fixed2", mode, plains, 0.010),
    ]
    assert rows[0].ratio == 1.0
    assert rows[1].ratio < 1.0  # every answer together: the stall weighs on the row
    summary = [line.split() for line in format_summary([rows])]
    assert summary[0] == ["mode", "mean", "ratio", "worst", "paired", "median", "first/later"]
    assert float(summary[2][1]) == round(rows[1].ratio, 2)
    assert summary[2][3] == "1.25"  # each answer against the plain one beside it: no drift, no stall


def _first_later(rows_by_prompt) -> dict[str, str]:
    summary = [line.split() for line in format_summary(rows_by_prompt)[1:]]
    return {row[0]: " ".join(row[4:]) for row in summary}  # mode, mean, worst, paired, first/later


def test_the_first_answer_is_judged_against_plain_in_its_own_turn() -> None:
    """The host ran 30% slower in the first turn: fixed k's first answer is no slower than its
    later ones beside plain, where against the later answers alone it looked 30% slow; an
    exploring first answer, 20% slower than plain beside it, is still flagged."""
    plains = [_answer(0.013), _answer(0.010), _answer(0.010)]
    steady = [_answer(0.0104), _answer(0.008), _answer(0.008)]
    exploring = [_answer(0.015), _answer(0.010), _answer(0.010)]
    rows = [
        reduce_answers("p", "plain", plains, plains, 0.010),
        reduce_answers("p", "fixed2", steady, plains, 0.010),
        reduce_answers("p", "adaptive", exploring, plains, 0.010),
    ]
    verdicts = _first_later([rows])
    assert verdicts["fixed2"] == "1.00 ok"
    assert verdicts["adaptive"].endswith("SLOW") and 1.1 < float(verdicts["adaptive"].split()[0]) < 1.2
    assert verdicts["plain"].endswith("SLOW")  # plain against its own later answers: the drift shows
    single = [
        reduce_answers("p", m, [r[0]], [plains[0]], 0.010) for m, r in (("plain", plains), ("fixed2", steady))
    ]
    assert _first_later([single]) == {"plain": "-", "fixed2": "-"}  # one answer each: nothing to compare
