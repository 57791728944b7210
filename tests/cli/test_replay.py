"""`python -m app replay`: records answers with the toy pair, saves them, replays them side by side."""

from __future__ import annotations

import json

import pytest

from app.cli import main


def test_replay_records_saves_and_replays_the_same_answers(toy_models, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "traces.json"
    code = main(["replay", "--main", str(toy_models.main), "--draft", str(toy_models.draft), "--classes", "code",
                 "--max-tokens", "24", "--k", "2,4", "--costs", "measured,bandwidth", "--seeds", "1", "--save", str(saved)])
    first = capsys.readouterr().out
    assert code == 0
    data = json.loads(saved.read_text())
    assert [t["label"] for t in data["traces"]] == ["code-1", "code-2"]
    assert all(len(t["answer"]) == len(t["draft_hits"]) == 24 for t in data["traces"])
    assert len(data["costs"]["verify"]) == 17 and data["costs"]["draft_step"] > 0
    for header in ("measured:", "bandwidth:"):
        assert header in first and "fixed4" in first
    # the saved answers replay without the models, to the same numbers (no noise: deterministic)
    args = ["replay", "--traces", str(saved), "--k", "2,4", "--costs", "bandwidth", "--noise", "0"]
    timing = "policy time per round, microseconds:"

    def replayed() -> list[str]:
        assert main(args) == 0
        return capsys.readouterr().out.splitlines()

    again = replayed()
    # every line but the policies' own Python time, which is this machine's real clock
    assert [line for line in replayed() if not line.startswith(timing)] == [
        line for line in again if not line.startswith(timing)]
    row = next(line for line in again if line.startswith("all"))
    assert float(row.split()[1]) > 0
    times = dict(cell.strip().rsplit(" ", 1) for cell in next(line for line in again if line.startswith(timing))
                 [len(timing):].split(","))
    assert set(times) == {"plain", "fixed2", "adaptive", "adaptive-draft"} and float(times["adaptive"]) > 0


def test_replay_without_models_or_traces_says_what_it_needs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay"]) == 2
    assert "needs --main and --draft" in capsys.readouterr().err


def test_replay_of_a_missing_file_is_an_error_not_a_crash(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--traces", str(tmp_path / "none.json")]) == 2
    assert "error" in capsys.readouterr().err
