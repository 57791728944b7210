"""The round profiler at the CPU-sized pair: every table row timed, both summary lines."""

from __future__ import annotations

import math

from app.engine.decoding.session import ChatSession
from lab.gpu.round_loop import PARTS, timing_parts
from lab.gpu.round_profile import main


def _number(text: str) -> float:
    value = float(text)
    assert math.isfinite(value)
    return value


def test_every_row_is_a_positive_time_and_the_summary_says_what_the_loop_adds(capsys) -> None:
    args = ["--pair", "tiny", "--k", "3", "--tokens", "32", "--answers", "2", "--trials", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("device: ") and "k: 3" in out.splitlines()[0]
    tables = out.split("\n\n")[1:]
    titles = [t.splitlines()[0] for t in tables[:3]]
    assert titles[0].startswith("draft toy-tiny-draft") and titles[1].startswith("main toy-tiny-main")
    assert titles[2].startswith("loop: fixed k = 3")
    labels = []
    for table in tables[:3]:
        for line in table.splitlines()[2:]:
            label, cells = line[:52].strip(), line[52:].split()
            labels.append(label)
            assert cells and all(_number(c) > 0 for c in cells), line
    # the split the profile is for, each on a row of its own
    for wanted in (
        "build one step's graph (host)",
        "evaluate a built step (kernels, launches)",
        "3 steps, each evaluated before the next",
        "3 steps chained by async_eval (the loop's)",
        "first step with 1 token of backlog (2 tokens)",
        "sampler process + draw (greedy)",
        "bare argmax",
        "floor: compiled 1-token forward, no cache",
        "floor: weight bytes / memory bandwidth",
        "verify pass over 9 tokens",
        "round wall (event to event)",
        "both passes alone",
        "loop's own (wall less the round's passes)",
        *(f"{part} (mean)" for part in PARTS),
    ):
        assert wanted in labels
    summary = tables[3].splitlines()
    assert summary[0].startswith("round wall / sum of passes: ")
    assert 0.3 < _number(summary[0].split()[6]) < 3  # a round is about its passes, on any host
    assert summary[1].startswith("loop's own cost per round (ms): "), (
        "the second summary line gives the loop's own cost"
    )
    assert _number(summary[1].split()[-1]) > 0, "the loop's own cost is positive"


def test_timing_the_loop_parts_leaves_the_loop_as_it_was(toy_pair, toy_prompt) -> None:
    from app.engine.decoding.decode import generate
    from app.engine.decoding.events import GenerationFinished
    from app.engine.decoding.policy import FixedDraftLength

    def answer(policy: FixedDraftLength) -> tuple[int, ...]:
        [*_, finished] = generate(ChatSession(toy_pair), toy_prompt, policy=policy, max_tokens=12)
        assert isinstance(finished, GenerationFinished)
        return finished.token_ids

    untimed = answer(FixedDraftLength(2))
    check = ChatSession.__dict__["check_caches"]
    policy = FixedDraftLength(2)
    with timing_parts(policy) as parts:
        assert answer(policy) == untimed, "timing the parts changes nothing the loop decides"
    timed = [dict(r) for r in parts.rounds]
    assert timed, "the answer's rounds were timed while the block was open"
    assert all(part in parts.rounds[0] for part in ("accept", "keep", "emit")), parts.rounds[0]
    assert answer(policy) == untimed
    assert parts.rounds == timed, "after the block, no part of an answer is timed"
    assert ChatSession.__dict__["check_caches"] is check, "the session's cache check is its own again"
    assert "observe" not in vars(policy), "the policy's observe is its own again"
