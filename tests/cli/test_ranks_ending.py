"""However `generate --ranks 2` is ended, its launcher and ranks end with it.

Each test starts a long answer, ends the caller the way a user or a tool would, and counts the
processes still running 5 s later: the launcher (the caller's child, leading its own process
group), everything in that group, and the ranks by the pids the caller printed.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import pytest

from app.engine.measure.toy import ToyModels

# how long the launcher and ranks may take to notice and end: a deadline for a busy machine, not
# a time that is asserted (the check ends as soon as they are gone)
SETTLE_S = 60.0


@dataclass
class Started:
    caller: subprocess.Popen[str]
    launchers: list[int]
    ranks: list[int]


def _table() -> list[tuple[int, int, int, str]]:
    """(pid, ppid, pgid, state) of every process (`ps` reads the same on macOS and Linux)."""
    out = subprocess.run(
        ["ps", "-A", "-o", "pid=,ppid=,pgid=,stat="], capture_output=True, text=True, check=True
    ).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4:
            rows.append((int(parts[0]), int(parts[1]), int(parts[2]), parts[3]))
    return rows


def _left(started: Started) -> list[int]:
    """The launcher's and ranks' processes still running (zombies waiting to be reaped are gone)."""
    groups = set(started.launchers)
    mine = set(started.launchers) | set(started.ranks)
    return [
        pid
        for pid, _ppid, pgid, state in _table()
        if not state.startswith("Z") and (pid in mine or pgid in groups)
    ]


def _start(toy_models: ToyModels, *, wrap: list[str] | None = None, session: bool = False) -> Started:
    """A long answer over 2 ranks, once its first character is printed."""
    command = [
        *(wrap or []),
        sys.executable,
        "-m",
        "app",
        "generate",
        "--main",
        str(toy_models.main),
        "--ranks",
        "2",
        "--max-tokens",
        "2000",
        "--color",
        "never",
        "Hello",
    ]
    caller = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=session,
    )
    watchdog = threading.Timer(120, caller.kill)
    watchdog.start()
    try:
        assert caller.stdout is not None and caller.stderr is not None
        line = caller.stderr.readline()
        ranks = [int(pid) for pid in re.findall(r"pid (\d+)", line)]
        assert len(ranks) == 2, line
        assert caller.stdout.read(1)  # the answer has begun
    finally:
        watchdog.cancel()
    # the python under `timeout` is the launcher's parent; the launcher leads its own group
    callers = {caller.pid} | {pid for pid, ppid, _, _ in _table() if ppid == caller.pid}
    launchers = [pid for pid, ppid, pgid, _ in _table() if ppid in callers and pgid == pid]
    assert launchers, "no launcher found"
    return Started(caller, launchers, ranks)


def _finish(started: Started) -> str:
    """The caller's remaining stderr once it has ended (within 30 s), after its launcher and
    ranks have ended too or SETTLE_S has passed."""
    caller = started.caller
    assert caller.stdout is not None and caller.stderr is not None
    watchdog = threading.Timer(30, caller.kill)
    watchdog.start()
    try:
        caller.stdout.read()
        errors = caller.stderr.read()
        caller.wait()
    finally:
        watchdog.cancel()
    deadline = time.monotonic() + SETTLE_S
    while _left(started) and time.monotonic() < deadline:
        time.sleep(0.1)
    return errors


def _clean_up(started: Started) -> None:
    for pid in _left(started):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.heavy  # the same handler as Ctrl-C's, tested below in the default run
def test_sigterm_ends_the_launcher_and_the_ranks(toy_models: ToyModels) -> None:
    started = _start(toy_models)
    try:
        started.caller.send_signal(signal.SIGTERM)
        errors = _finish(started)
        assert _left(started) == []
        assert started.caller.returncode == 128 + signal.SIGTERM
        assert "Traceback" not in errors
    finally:
        _clean_up(started)


def test_ctrl_c_ends_everything_and_prints_one_line(toy_models: ToyModels) -> None:
    started = _start(toy_models, session=True)
    try:
        # a terminal's Ctrl-C goes to the whole foreground group
        os.killpg(started.caller.pid, signal.SIGINT)
        errors = _finish(started)
        assert _left(started) == []
        assert started.caller.returncode == 128 + signal.SIGINT
        said = [line for line in errors.splitlines() if line.strip()]
        assert len(said) == 1, f"one line about the ending: {errors}"
        assert "stopped" in said[0], f"the line says the ranks stopped: {errors}"
    finally:
        _clean_up(started)


def test_a_killed_caller_takes_its_ranks_with_it(toy_models: ToyModels) -> None:
    """SIGKILL runs no handler: the launcher and each rank notice their parent is gone."""
    started = _start(toy_models)
    try:
        started.caller.kill()
        _finish(started)
        assert _left(started) == []
    finally:
        _clean_up(started)


@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils' timeout")
@pytest.mark.heavy  # coreutils' timeout sends SIGTERM: the handler the Ctrl-C test covers
def test_a_timeout_ends_the_launcher_and_the_ranks(toy_models: ToyModels) -> None:
    """coreutils' `timeout`, expiring once the answer has begun: it takes SIGALRM as its own
    timer running out (so the test need not guess how long the ranks take to start)."""
    started = _start(toy_models, wrap=["timeout", "-s", "TERM", "600"])
    try:
        started.caller.send_signal(signal.SIGALRM)
        errors = _finish(started)
        assert started.caller.returncode == 124, errors  # timeout's own word that it ended it
        assert _left(started) == []
    finally:
        _clean_up(started)
