"""Start N ranks of a module on this host with the environment `mlx.launch` gives them.

`mlx.launch` runs its command verbatim through bash, so `python3` must be the right interpreter
on PATH; starting the ranks from here with `sys.executable` guarantees every rank runs the
interpreter (and PYTHONPATH) of the caller. The variables are those mlx.launch sets: for ring,
MLX_HOSTFILE (a JSON file of one "ip:port" list per rank) and MLX_RANK; for nccl, NCCL_HOST_IP,
NCCL_PORT, MLX_WORLD_SIZE, MLX_RANK and one GPU per rank through CUDA_VISIBLE_DEVICES.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def rank_envs(ranks: int, backend: str, workdir: Path) -> list[dict[str, str]]:
    """The extra environment of each rank."""
    if backend == "ring":
        hostfile = workdir / "hosts.json"
        hostfile.write_text(json.dumps([[f"127.0.0.1:{p}"] for p in free_ports(ranks)]))
        return [{"MLX_HOSTFILE": str(hostfile), "MLX_RANK": str(r)} for r in range(ranks)]
    if backend == "nccl":
        port = str(free_ports(1)[0])
        common = {"NCCL_HOST_IP": "127.0.0.1", "NCCL_PORT": port, "MLX_WORLD_SIZE": str(ranks)}
        return [{**common, "MLX_RANK": str(r), "CUDA_VISIBLE_DEVICES": str(r)} for r in range(ranks)]
    raise ValueError(f"local launch knows the ring and nccl backends, not '{backend}'")


def launch(module: str, argv: Sequence[str], ranks: int, backend: str, timeout_s: float) -> int:
    """Run `python -m module argv` as `ranks` ranks; stop them all when one fails or time runs out."""
    with tempfile.TemporaryDirectory(prefix="specchat-launch-") as tmp:
        procs = [
            subprocess.Popen([sys.executable, "-m", module, *argv], env={**os.environ, **extra})
            for extra in rank_envs(ranks, backend, Path(tmp))
        ]
        deadline = time.monotonic() + timeout_s
        try:
            while any(p.poll() is None for p in procs):
                failed = any(p.returncode not in (None, 0) for p in procs)
                if failed or time.monotonic() > deadline:
                    print(
                        f"local_launch: stopping the ranks ({'a rank failed' if failed else 'timeout'})",
                        file=sys.stderr,
                    )
                    break
                time.sleep(0.1)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                p.wait()
        return max((abs(p.returncode) for p in procs), default=0)
