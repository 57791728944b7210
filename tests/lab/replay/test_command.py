"""`python -m lab.replay`: records answers with the toy pair, saves them, replays them side by side."""

from __future__ import annotations

import json

import pytest

from lab.replay.__main__ import main


def test_replay_records_saves_and_replays_the_same_answers(
    toy_models, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "traces.json"
    code = main(
        [
            "--main",
            str(toy_models.main),
            "--draft",
            str(toy_models.draft),
            "--classes",
            "code",
            "--max-tokens",
            "24",
            "--k",
            "2,4",
            "--costs",
            "measured,bandwidth",
            "--seeds",
            "1",
            "--save",
            str(saved),
        ]
    )
    first = capsys.readouterr().out
    assert code == 0
    data = json.loads(saved.read_text())
    assert [t["label"] for t in data["traces"]] == ["code-1", "code-2"]
    assert all(len(t["answer"]) == len(t["draft_hits"]) == 24 for t in data["traces"])
    assert len(data["costs"]["verify"]) == 17, "one verify cost for each pass size"
    # drafting costs time; how it splits between a fixed part and a part per token is this
    # machine's timing (a busy machine can make the fitted part per token zero)
    assert data["costs"]["draft_fixed"] + 8 * data["costs"]["draft_step"] > 0, "drafting costs time"
    for header in ("measured:", "bandwidth:"):
        assert header in first and "fixed4" in first
    # the saved answers replay without the models, to the same numbers (no noise: deterministic)
    args = ["--traces", str(saved), "--k", "2,4", "--costs", "bandwidth", "--noise", "0"]
    timing = "policy time per round, microseconds:"

    def replayed() -> list[str]:
        assert main(args) == 0
        return capsys.readouterr().out.splitlines()

    again = replayed()
    # every line but the policies' own Python time, which is this machine's real clock
    assert [line for line in replayed() if not line.startswith(timing)] == [
        line for line in again if not line.startswith(timing)
    ]
    row = next(line for line in again if line.startswith("all"))
    assert float(row.split()[1]) > 0
    times = dict(
        cell.strip().rsplit(" ", 1)
        for cell in next(line for line in again if line.startswith(timing))[len(timing) :].split(",")
    )
    assert set(times) == {"plain", "fixed2", "adaptive", "lookup"}, "every policy is timed"
    assert float(times["adaptive"]) > 0, "the adaptive policy's time is positive"


def test_replay_without_models_or_traces_says_what_it_needs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "needs --main and --draft" in capsys.readouterr().err


def test_replay_of_a_missing_file_is_an_error_not_a_crash(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--traces", str(tmp_path / "none.json")]) == 2
    assert "error" in capsys.readouterr().err


def test_replay_can_put_every_answer_first_in_turn(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """The first answer a controller sees pays for exploring the pair; --rotate replays the answers
    once from each of them and sums the runs, so no answer always carries that cost."""
    from lab.replay.simulate import CostModel, Trace, run_policies, save_traces

    easy = Trace((1, 2, 3), tuple(range(100, 160)), (True,) * 60, "code-1")
    hard = Trace((1, 2, 3), tuple(range(200, 260)), tuple(i % 3 == 0 for i in range(60)), "prose-1")
    saved = tmp_path / "traces.json"
    save_traces(saved, [easy, hard], None)
    assert (
        main(
            [
                "--traces",
                str(saved),
                "--k",
                "2,4",
                "--costs",
                "bandwidth",
                "--noise",
                "0",
                "--rotate",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "every answer first in turn" in out
    shown = {
        line.split()[0]: float(line.split()[4])
        for line in out.splitlines()
        if line.split() and line.split()[0] in ("code", "prose")
    }  # adaptive's speed over plain

    bandwidth = CostModel.shaped("bandwidth")
    first, second = (
        run_policies([easy, hard], bandwidth, (2, 4)),
        run_policies([hard, easy], bandwidth, (2, 4)),
    )

    def over_plain(runs: list) -> float:
        adaptive = sum(r.tokens for r in runs[0]) / sum(r.seconds for r in runs[0])
        return adaptive / (sum(r.tokens for r in runs[1]) / sum(r.seconds for r in runs[1]))

    assert shown["code"] == round(
        over_plain([[first["adaptive"][0], second["adaptive"][1]], [first["plain"][0], second["plain"][1]]]),
        2,
    )
    assert shown["prose"] == round(
        over_plain([[first["adaptive"][1], second["adaptive"][0]], [first["plain"][1], second["plain"][0]]]),
        2,
    )


def test_replay_takes_answers_recorded_in_several_files_as_one_set(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Answers recorded at different times (more prompts later) replay together: the same table
    as one file holding them all."""
    from lab.replay.simulate import Trace, save_traces

    easy = Trace((1, 2, 3), tuple(range(100, 160)), (True,) * 60, "code-1")
    hard = Trace((1, 2, 3), tuple(range(200, 260)), tuple(i % 3 == 0 for i in range(60)), "prose-1")
    save_traces(tmp_path / "a.json", [easy], None)
    save_traces(tmp_path / "b.json", [hard], None)
    save_traces(tmp_path / "both.json", [easy, hard], None)
    args = ["--k", "2,4", "--costs", "bandwidth", "--noise", "0"]
    assert main(["--traces", f"{tmp_path / 'a.json'},{tmp_path / 'b.json'}", *args]) == 0
    split = capsys.readouterr().out
    assert main(["--traces", str(tmp_path / "both.json"), *args]) == 0
    whole = capsys.readouterr().out
    table = lambda out: [line for line in out.splitlines() if not line.startswith("policy time")]
    assert table(split) == table(whole), "two trace files replay as their union does"
    assert "2 answers" in split, "the report counts both answers"
    assert main(["--traces", f"{tmp_path / 'a.json'},{tmp_path / 'none.json'}", *args]) == 2


def test_replay_compares_controller_settings_run_by_run(capsys: pytest.CaptureFixture[str]) -> None:
    """A setting other than the default changes what adaptive gets and nothing else, so two runs
    side by side compare it (here: a margin so wide that nothing is worth drafting); a setting
    that does not exist, a value of the wrong kind or one out of bounds is refused."""
    from pathlib import Path

    traces = str(Path(__file__).parents[2] / "engine" / "data" / "draft_right_90.json")
    args = ["--traces", traces, "--costs", "flat-14b-spells", "--k", "4,6", "--noise", "0"]
    rows = []
    for extra in ([], ["--setting", "margin=2.0"]):
        assert main([*args, *extra]) == 0
        rows.append(
            next(line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("all"))
        )
    assert rows[0][:4] == rows[1][:4]  # plain and the fixed lengths are the same replay
    assert rows[0][4:] != rows[1][4:]  # adaptive is not
    assert main([*args, "--setting", "stay=1"]) == 2
    assert "probe_share" in capsys.readouterr().err
    assert main([*args, "--setting", "margin=high"]) == 2
    assert "margin takes float" in capsys.readouterr().err
    assert main([*args, "--setting", "margin=0.5"]) == 2
    assert "margin must be between" in capsys.readouterr().err
