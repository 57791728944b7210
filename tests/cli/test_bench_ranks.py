"""`python -m app bench --ranks N`: the benchmark's rank 0 runs with the main split."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.cli.bench_split import rank_arguments
from app.engine.measure.toy import ToyModels


def test_each_rank_gets_the_bench_without_its_placement() -> None:
    argv = ["--main", "m", "--ranks", "2", "--rank-timeout=5", "--hostfile", "h.json", "--k", "3"]
    assert rank_arguments(argv) == ["--main", "m", "--k", "3", "--split-rank"]


@pytest.mark.heavy  # the split main is covered through generate; this is bench's use of it
def test_bench_over_two_ranks_matches_plain(toy_models: ToyModels) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "bench",
            "--main",
            str(toy_models.main),
            "--draft",
            str(toy_models.draft),
            "--ranks",
            "2",
            "--modes",
            "plain,fixed",
            "--k",
            "3",
            "--max-tokens",
            "8",
            "--classes",
            "prose",
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("all ")]
    assert [row[1] for row in rows] == ["plain", "fixed3"], "bench over ranks reports plain and fixed k = 3"
    assert all(row[-1] == "yes" for row in rows), "every answer matched the plain one"
    assert "rank 0 shared" in result.stderr
