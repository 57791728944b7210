"""Starting the ranks with `mlx.launch`, and ending them.

The launcher runs in its own process group (a new session), so killing that group ends it and
every local rank even when one is stuck in a collective, which MLX never times out; a remote
rank is ended by its ssh connection closing. The launcher and each rank also end themselves when
their parent goes (`guard.py`), so a caller killed outright leaves nothing behind. Local ranks
(`--ranks N`) share one machine's cores, so each gets one thread for the math libraries.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

from app.engine.distributed.hosts import read_hostfile

# the launcher's code: mlx.launch under a guard that ends its group once the caller is gone
_LAUNCH = "import sys; sys.path.insert(0, {root!r}); from app.engine.distributed.guard import run_launcher; run_launcher({caller})"
_LOST = re.compile(r"Node with rank (\d+) (?:exited with code (-?\d+)|was killed)")
_ONE_THREAD = ("OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "MKL_NUM_THREADS=1", "VECLIB_MAXIMUM_THREADS=1")
_APP_ROOT = Path(__file__).resolve().parents[3]  # the folder holding the `app` package


def free_port_run(count: int, tries: int = 50) -> int:
    """A first port of `count` consecutive free ones on 127.0.0.1 (the ring listens on each)."""
    for _ in range(tries):
        first = random.randint(20000, 60000 - count)
        sockets: list[socket.socket] = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise OSError(f"found no {count} consecutive free ports")


def launch_command(
    rank_args: Sequence[str],
    *,
    ranks: int | None = None,
    hostfile: str | os.PathLike[str] | None = None,
    python: str | None = None,
    module: str = "app.engine.distributed.rank",
) -> list[str]:
    """`mlx.launch`'s command line running `python -m module rank_args` on N local ranks or on a
    hostfile's machines (each needs this Python at the same path, and the models). A hostfile is
    read first (`HostfileError`, in our words, rather than the launcher's traceback line)."""
    if (ranks is None) == (hostfile is None):
        raise ValueError("give either a number of local ranks or a hostfile")
    if hostfile is not None:
        read_hostfile(Path(hostfile))
    python = python or sys.executable
    code = _LAUNCH.format(root=str(_APP_ROOT), caller=os.getpid())
    launch = [python, "-c", code, "--env", f"PYTHONPATH={_APP_ROOT}"]
    if ranks is not None:
        if ranks < 2:
            raise ValueError("splitting the main needs at least 2 ranks")
        launch += ["--backend", "ring", "--hosts", "127.0.0.1", "-n", str(ranks)]
        launch += ["--starting-port", str(free_port_run(ranks))]
        for setting in _ONE_THREAD:
            launch += ["--env", setting]
    else:
        launch += ["--hostfile", str(hostfile)]
    return [*launch, "--", python, "-m", module, *rank_args]


class Launch:
    """The running launcher: its stdout lines, the tail of its stderr, and a way to end it."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        """`env` is added to this process's environment for the launcher and its local ranks."""
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            bufsize=1,
            start_new_session=True,
            env={**os.environ, **env} if env else None,
        )
        self.errors: deque[str] = deque(maxlen=200)
        self._err_thread = threading.Thread(target=self._read_errors, daemon=True)
        self._err_thread.start()

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line.rstrip())

    def write(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text)
        self.process.stdin.flush()

    def kill(self, grace: float = 2.0) -> None:
        """Let the launcher end on its own for `grace` seconds, then kill its whole group."""
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        self._err_thread.join(timeout=2.0)

    def lost_ranks(self) -> list[tuple[int, str]]:
        """(rank, how) for each rank the launcher saw end badly, first the ones it did not end
        itself (it terminates the others once one fails, with SIGTERM: code -15)."""
        found: list[tuple[int, str]] = []
        for line in list(self.errors):
            match = _LOST.search(line)
            if match is None:
                continue
            code = match.group(2)
            how = f"exited with code {code}" if code is not None else "was killed"
            found.append((int(match.group(1)), how))
        return sorted(found, key=lambda item: item[1] == "exited with code -15")
