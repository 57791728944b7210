"""gpu_bench's rows and summary, from made-up answers: what a shared host's drift and stalls do to them."""

from __future__ import annotations

import math

from app.engine.features.timed_run import TimedRun
from app.engine.policy.oracle import RoundRecord
from lab.gpu.passes_alone import PassesAlone
from lab.gpu.report import fixed_costs, format_summary, reduce_answers


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
    assert verdicts["adaptive"].endswith("SLOW"), "an adaptive first answer that is slower is flagged SLOW"
    assert 1.1 < float(verdicts["adaptive"].split()[0]) < 1.2, "the first answer's ratio is reported"
    assert verdicts["plain"].endswith("SLOW")  # plain against its own later answers: the drift shows
    single = [
        reduce_answers("p", m, [r[0]], [plains[0]], 0.010) for m, r in (("plain", plains), ("fixed2", steady))
    ]
    assert _first_later([single]) == {"plain": "-", "fixed2": "-"}  # one answer each: nothing to compare


def _round(k: int, accepted: int, draft: float, verify: float, wall: float, catch_up: int = 0) -> RoundRecord:
    return RoundRecord(k, accepted, draft, verify, wall, "draft", catch_up)


def test_the_leviathan_prediction_is_the_hand_computed_one() -> None:
    """Four rounds of k = 2 after an answer's first: acceptance by position counts every round,
    costs only those timed on their own (the first round's wall holds the prompt's read)."""
    log = [
        _round(2, 2, 0.500, 0.500, 0.0),  # the first: acceptance only
        _round(2, 0, 0.020, 0.030, 0.060, catch_up=1),
        _round(2, 1, 0.040, 0.030, 0.080),
        _round(2, 2, 0.020, 0.050, 0.070),
        _round(2, 2, 0.030, 0.030, 0.060, catch_up=1),
    ]
    run = TimedRun(ids=list(range(10)), stamps=[0.1 * i for i in range(10)], start=0.0, log=log)
    alone = PassesAlone(draft={(2, 0): 0.020, (2, 1): 0.030}, verify={1: 0.010, 3: 0.030})
    costs = fixed_costs("fixed2", 2, [run], alone)
    # position 0 reached by all five rounds, accepted by four; position 1 reached by those four,
    # accepted by three: a round gives 1 + 4/5 + 4/5 * 3/4 = 2.4 tokens
    assert costs.acceptance == (0.8, 0.75)
    draft, verify = 0.025, 0.030  # medians of the four timed rounds
    assert math.isclose(costs.predicted_rate, 2.4 / (draft + verify))
    assert math.isclose(costs.draft_per_token, draft / 2), (
        "the draft's cost per token is its median pass over k"
    )
    assert math.isclose(costs.verify, verify), "the verify cost is its median pass"
    assert math.isclose(costs.measured_rate, 9 / 0.9)
    walls, passes_in = 0.27, 0.25
    passes_alone = (0.030 + 0.030) + (0.020 + 0.030) * 2 + (0.030 + 0.030)  # by each round's catch-up
    assert math.isclose(costs.wall_over_in_round, walls / passes_in)
    assert math.isclose(costs.wall_over_alone, walls / passes_alone)
    assert math.isclose(costs.wall, 0.065)
