"""`bench --ranks N` / `--hostfile FILE`: the benchmark with the main split across ranks.

The parent starts `mlx.launch`, which runs `python -m app bench ... --split-rank` on every rank;
rank 0 runs the benchmark itself, with the sharded main in place of the main (its passes are
shared with the other ranks), so every mode, mlx-lm's loop included, runs as in one process.
The parent passes the ranks' output through; a rank that ends badly makes it exit 1."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from app.engine.distributed.launcher import launch_command

if TYPE_CHECKING:
    from app.engine.decoding.loading import ModelPair

_OWN = {"--ranks", "--hostfile", "--rank-timeout"}  # the parent's options, with a value each


def rank_arguments(argv: list[str]) -> list[str]:
    """The bench's own command line without the options that placed it, plus --split-rank."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _OWN:
            skip = True
        elif not any(arg.startswith(option + "=") for option in _OWN):
            kept.append(arg)
    return [*kept, "--split-rank"]


def _relay(source: IO[str], sink: IO[str], seen: list[str]) -> None:
    for line in source:
        sink.write(line)
        sink.flush()
        if "Node with rank" in line and "completed" not in line:
            seen.append(re.sub(r"\x1b\[[0-9;]*m", "", line).strip())


def launch(args: argparse.Namespace) -> int:
    from app.cli.sharded import refused

    if (code := refused(args)) is not None:  # the split's checks, before any rank starts
        return code
    try:
        command = launch_command(
            ["bench", *rank_arguments(sys.argv[2:])], ranks=args.ranks, hostfile=args.hostfile, module="app"
        )
    except ValueError as exc:  # a hostfile that cannot be used, or too few ranks
        print(f"error: {exc}", file=sys.stderr)
        return 2
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None and process.stderr is not None
    lost: list[str] = []
    relays = [
        threading.Thread(target=_relay, args=(process.stdout, sys.stdout, lost)),
        threading.Thread(target=_relay, args=(process.stderr, sys.stderr, lost)),
    ]
    for relay in relays:
        relay.start()
    try:
        process.wait()
    except KeyboardInterrupt:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    for relay in relays:
        relay.join()
    if lost:
        print(f"error: a rank ended badly ({lost[0]})", file=sys.stderr)
        return 1
    return 0


def run_rank(args: argparse.Namespace, measure: Callable[[argparse.Namespace, ModelPair], int]) -> int:
    """One rank: rank 0 benchmarks with the sharded main; the others follow its passes."""
    from app.engine.distributed.rank import exit_now, join

    def report(message: dict[str, Any]) -> None:
        if message["t"] == "fatal":
            print(f"error: {message['message']}", file=sys.stderr)

    joined = join(args.main, args.draft, report)
    if isinstance(joined, int):
        exit_now(joined)
    code = measure(args, joined.pair)
    joined.sharded.stop()
    channel = joined.sharded.channel
    print(
        f"rank 0 shared {channel.calls} commands in {channel.seconds:.2f} s of collectives", file=sys.stderr
    )
    exit_now(code)
