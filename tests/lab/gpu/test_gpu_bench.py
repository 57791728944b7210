"""The GPU bench script at the CPU-sized pair: every column, every mode, plausible ratios."""

from __future__ import annotations

import json
import math

import pytest

from lab.gpu import gpu_bench
from lab.gpu.gpu_bench import main, mode_names
from lab.gpu.report import COLUMNS, COST_COLUMNS


def test_tiny_run_prints_every_mode_for_every_prompt(capsys) -> None:
    assert main(["--pair", "tiny", "--prompts", "2", "--tokens", "20", "--ks", "2,4", "--quiet"]) == 0
    printed = capsys.readouterr().out.splitlines()
    # the CPU's caches do not pad keys, so its passes are never compiled; the choice is still said
    choices = [line for line in printed if line.startswith("compiled passes, ")]
    assert choices == [f"compiled passes, {role}: off (caches not padded)" for role in ("main", "draft")]
    lines = [line for line in printed if line not in choices]
    assert lines[0].startswith("device: ") and "pair: tiny" in lines[0]
    assert lines[1].startswith("load ") and "warm-up" in lines[1]
    assert lines[2].split() == [c for col in COLUMNS for c in col.split()]
    modes = mode_names([2, 4])
    rows = [line.split() for line in lines[3 : 3 + 2 * len(modes)]]
    assert [r[1] for r in rows] == modes * 2
    assert len({r[0] for r in rows}) == 2
    for prompt, mode, rate, ratio, accepted, rounds, worst, slow, stall, same in rows:
        taken, offered = map(int, accepted.split("/"))
        assert float(rate) > 0, "every mode decodes at a positive rate"
        assert float(ratio) > 0, "a mode's time against plain is a real ratio"
        assert math.isfinite(float(worst)), "the worst round is a real time"
        assert same == "yes"  # greedy: every mode gives plain's answer
        assert taken <= offered, "no more drafts accepted than offered"
        assert int(slow) <= int(rounds), "no more slow rounds than rounds"
        assert 0 <= float(stall) <= float(worst)  # beyond its kind's median: never more than the round
        if mode.startswith("plain") or mode == "mlx_plain":
            assert (offered, int(rounds)) == (0, 20)
        elif mode != "adaptive":  # adaptive may rightly bypass a draft that does not pay on a CPU
            assert offered > 0, "fixed k offers drafted tokens"
            assert int(rounds) < 20, "drafting needs fewer rounds than tokens"
    assert rows[0][3] == "1.00"
    summary = lines[3 + 2 * len(modes) :]
    assert summary[0].split() == ["mode", "mean", "ratio", "worst", "paired", "median", "first/later"]
    assert [s.split()[0] for s in summary[1 : 1 + len(modes)]] == modes
    agreement = summary[-1].split()
    assert agreement[:2] == ["agreement", "measured:"], "the summary ends with the measured agreement"
    assert abs(float(agreement[2]) - 0.9) <= 0.15, "the tiny pair's agreement is about 0.9"
    # each fixed k's round against the floors measured in the same run, and against its passes
    at = next(i for i, line in enumerate(summary) if line.startswith("floors, measured after warm-up"))
    floors = summary[at : at + 4]
    assert floors[1].startswith("  draft: compiled 1-token forward ") and floors[2].startswith("  main: ")
    assert "weights" in floors[1], "the draft's floor is read against its weights"
    assert "bandwidth" in floors[2], "the main's floor is read against bandwidth"
    assert "x compiled" in floors[3], "the third floor line compares with compiled passes"
    assert summary[at + 4].split() == list(COST_COLUMNS)
    costs = [line.split() for line in summary[at + 5 : at + 7]]
    assert [c[0] for c in costs] == ["fixed2", "fixed4"]
    for row in costs:
        assert all(math.isfinite(float(x)) and float(x) > 0 for x in row[1:]), row
        # the ratios (wall time against passes, measured against predicted) are timings of this
        # machine; what the test can hold them to is that each was measured
        assert len(row) >= 13, "the wall-time ratios and the prediction are reported"


def test_repeat_plays_every_mode_that_many_times_in_turn(capsys) -> None:
    args = ["--pair", "tiny", "--prompts", "1", "--tokens", "24", "--modes", "fixed2", "--repeat", "3"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    progress = [line.split()[1] for line in err.splitlines() if line.startswith("  ")]
    assert progress == ["plain", "fixed2"] * 3  # in turn: a slow minute falls on every mode alike
    table = [line for line in out.splitlines() if not line.startswith("compiled passes, ")]
    rows = [line.split() for line in table[3:5]]
    assert [r[1] for r in rows] == ["plain", "fixed2"], "plain and fixed k = 2 are both reported"
    assert rows[1][-1] == "yes", "fixed k = 2 gives plain's answer"
    assert rows[0][5] == "24"  # the first answer's rounds, not the three answers' sum


def test_rounds_file_holds_every_answer_in_the_order_it_was_timed(tmp_path, capsys) -> None:
    path = tmp_path / "rounds.json"
    args = [
        "--pair",
        "tiny",
        "--prompts",
        "1",
        "--tokens",
        "24",
        "--modes",
        "fixed2,adaptive",
        "--repeat",
        "2",
    ]
    assert main([*args, "--quiet", "--rounds", str(path)]) == 0
    out = capsys.readouterr().out
    # the app's first answer after loading a pair it has used: a controller restored from this one
    restored = [line for line in out.splitlines() if line.startswith("adaptive restored")]
    assert len(restored) == 1, "one restored adaptive answer is reported"
    assert float(restored[0].split()[-2]) > 0, "its rate is positive"
    answers = json.loads(path.read_text())
    assert [a["mode"] for a in answers] == ["plain", "fixed2", "adaptive"] * 2 + [
        "learnt",
        "restored",
        "restored",
        "learnt",
    ] * 4  # eight turns, alternating which goes first
    fixed = answers[1]["rounds"]
    assert all(r["k"] == 2 for r in fixed[:-1]), "fixed k = 2 drafts 2 tokens every round but the last"
    assert sum(r["accepted"] for r in fixed) <= 2 * len(fixed), "at most 2 drafted tokens accepted a round"
    assert all(r["k"] == 0 for r in answers[0]["rounds"]), "plain answers draft nothing"
    assert len(answers[0]["rounds"]) == 24, "a plain answer of 24 tokens takes 24 rounds"
    silent = [r for r in answers[2]["rounds"] if not isinstance(r["why"], str) or not r["why"]]
    assert silent == [], "every adaptive round says why it chose its k"
    assert all(0.0 <= a <= 1.0 for r in answers[2]["rounds"] for a in r["draft_acceptance"])
    assert any(len(r["draft_acceptance"]) == 8 for r in answers[2]["rounds"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--modes", "fixed5"],
            "unknown mode fixed5: choose from plain, mlx_plain, mlx_lm, fixed2, fixed4, fixed6",
        ),
        (["--modes", "adaptive,plian2"], "unknown mode plian2"),
        (["--ks", "2,four"], "--ks takes whole numbers"),
    ],
)
def test_a_bad_mode_or_length_is_refused_before_any_model_is_built(
    args, message, capsys, monkeypatch
) -> None:
    def no_build(*_args, **_kwargs):
        raise AssertionError("a pair was built for a command line that was refused")

    monkeypatch.setattr(gpu_bench, "build_pair", no_build)
    with pytest.raises(SystemExit) as refused:
        main(["--pair", "tiny", *args])
    assert refused.value.code == 2, "a refused command line exits 2"
    assert message in capsys.readouterr().err, "the refusal says why"
