"""`python -m app generate --ranks N`: the main split over local processes, as a user runs it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from app.engine.measure.toy import ToyModels


def _args(models: ToyModels, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "app",
        "generate",
        "--main",
        str(models.main),
        "--draft",
        str(models.draft),
        *extra,
    ]


def test_two_ranks_print_what_one_process_prints(toy_models: ToyModels) -> None:
    common = ("--k", "3", "--max-tokens", "10", "--color", "never", "The quick brown fox")
    alone = subprocess.run(_args(toy_models, *common), capture_output=True, text=True, timeout=300)
    split = subprocess.run(
        _args(toy_models, "--ranks", "2", *common), capture_output=True, text=True, timeout=300
    )
    assert alone.returncode == 0, f"generate on one process succeeds: {alone.stderr}"
    assert split.returncode == 0, f"generate over two ranks succeeds: {split.stderr}"
    assert split.stdout == alone.stdout
    assert "[2 ranks]" in split.stderr and "[length] 10 tokens" in split.stderr


@pytest.mark.heavy  # test_lost_rank covers a lost rank ending the answer, without the command line
def test_a_killed_rank_ends_the_answer_with_the_text_so_far(toy_models: ToyModels) -> None:
    prompt = "Hello"
    run = subprocess.Popen(
        _args(toy_models, "--ranks", "2", "--max-tokens", "300", "--color", "never", prompt),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert run.stdout is not None and run.stderr is not None
    ranks = run.stderr.readline()
    found = re.search(r"rank 1: \S+ pid (\d+)", ranks)
    assert found, ranks
    first = run.stdout.read(1)  # the answer has begun (the toy never stops within 300 tokens)
    os.kill(int(found.group(1)), signal.SIGKILL)
    # read through the same buffered files (communicate would skip what they already hold);
    # a CLI that hung instead of ending would be killed, and fail below
    watchdog = threading.Timer(240, run.kill)
    watchdog.start()
    try:
        rest, errors = run.stdout.read(), run.stderr.read()
        run.wait()
    finally:
        watchdog.cancel()
    assert run.returncode == 1
    assert "lost a rank: rank 1" in errors, errors
    written = (first + rest).rstrip("\n")
    assert written
    # the pair then answers in one process, and what was printed is the start of its answer
    alone = subprocess.run(
        _args(toy_models, "--max-tokens", "300", "--color", "never", prompt),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert alone.returncode == 0
    assert alone.stdout.startswith(written) and len(written) < len(alone.stdout.rstrip("\n"))
