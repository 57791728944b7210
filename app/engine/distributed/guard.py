"""Parent-death checks for the launcher and the ranks, so none outlives the process that started it.

macOS has no `prctl(PR_SET_PDEATHSIG)`, so a thread polls `os.getppid()`: a process whose parent
has gone is adopted by another (init or a subreaper), and its parent id changes. The launcher then
kills its whole process group (itself and every local rank); a rank leaves at once (its parent is
the launcher, or on another Mac the ssh session that ran it).

This module imports nothing of the app, so the launcher can run it before `mlx.launch`.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

POLL_S = 0.2


def watch_parent(parent: int, on_gone: Callable[[], None], poll_s: float = POLL_S) -> threading.Thread:
    """Call `on_gone` (from a daemon thread) once this process's parent is no longer `parent`."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        on_gone()

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread


def end_group() -> None:
    """Kill this process's whole group, this process included (the launcher and its ranks)."""
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os._exit(1)


def run_launcher(caller: int) -> None:
    """`mlx.launch`, ended with its ranks when `caller` goes away or it is asked to stop.

    It runs in a group of its own (the caller starts it in a new session), so `end_group` reaches
    every local rank and each ssh that runs a remote one (whose closing ends that rank)."""
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, lambda *_: end_group())
    watch_parent(caller, end_group)
    from mlx._distributed_utils.launch import main

    main()  # type: ignore[no-untyped-call]  # mlx declares no types here


def guard_rank() -> None:
    """A rank leaves as soon as the process that ran it is gone, even mid-collective (MLX's waits
    release the interpreter, so this thread runs while the main thread is blocked)."""

    def leave() -> None:
        print(f"rank {os.environ.get('MLX_RANK', '?')}: the launcher is gone; leaving", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)

    parent = os.getppid()
    if parent == 1:  # adopted before this check began: the launcher is already gone
        leave()
    watch_parent(parent, leave)
