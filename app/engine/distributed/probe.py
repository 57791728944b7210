"""The connection test: reach every machine the way mlx.launch starts its ranks (ssh, then
Python from the same place as here), and ask it what it runs and how much memory it has free.

Up to `AT_ONCE` machines are asked at a time, each with a deadline, so one that is asleep costs
the test seconds, not minutes, and a long list never starts hundreds of ssh processes at once.
The command is built by a `runner`, which tests replace to run without ssh.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from app import __version__
from app.engine.distributed.host_names import host_name_problem
from app.engine.library.memory import available_ram, physical_ram
from app.engine.platform_words import this_machine

# host, the shell script to run there -> the argv that runs it from here
Runner = Callable[[str, str], list[str]]
TIMEOUT = 10.0
APP_ROOT = Path(__file__).resolve().parents[3]  # the folder holding the `app` package
SSH_CONNECT_TIMEOUT = 5
AT_ONCE = 8  # machines asked at the same time


@dataclass(frozen=True, slots=True)
class HostInfo:
    """One machine's answer to `python -m app probe-host`."""

    hostname: str
    mlx_version: str | None
    specchat_version: str
    free_memory: int  # bytes a new process could still use
    total_memory: int
    platform: str
    python: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> HostInfo:
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        strings = ("hostname", "specchat_version", "platform", "python")
        if any(not isinstance(data.get(k), str) for k in strings):
            raise ValueError("a name or version is missing")
        if any(not isinstance(data.get(k), int) or data[k] < 0 for k in ("free_memory", "total_memory")):
            raise ValueError("the memory sizes are missing")
        mlx = data.get("mlx_version")
        return cls(
            hostname=data["hostname"],
            mlx_version=mlx if isinstance(mlx, str) else None,
            specchat_version=data["specchat_version"],
            free_memory=data["free_memory"],
            total_memory=data["total_memory"],
            platform=data["platform"],
            python=data["python"],
        )


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What the test found for one machine: its answer, or why there is none."""

    host: str
    info: HostInfo | None
    problem: str | None = None  # why it cannot be reached, in plain words
    mismatch: str | None = None  # versions differing from this Mac's: it would be refused
    differs: tuple[str, ...] = ()  # which: "MLX", "SpecChat"

    @property
    def reachable(self) -> bool:
        return self.info is not None

    @property
    def ok(self) -> bool:
        return self.info is not None and self.mismatch is None


def free_memory() -> int:
    """Free RAM: MemAvailable on Linux; on macOS free, inactive and purgeable pages (vm_stat)."""
    if sys.platform != "darwin":
        return available_ram()
    try:
        out = subprocess.run(["vm_stat"], capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return physical_ram()
    return parse_vm_stat(out) or physical_ram()


def parse_vm_stat(text: str) -> int:
    page, pages = 4096, 0
    for line in text.splitlines():
        if "page size of" in line:
            page = int("".join(c for c in line.split("page size of", 1)[1] if c.isdigit()) or page)
        name, _, value = line.partition(":")
        if name.strip() in ("Pages free", "Pages inactive", "Pages speculative", "Pages purgeable"):
            pages += int(value.strip().rstrip(".") or 0)
    return pages * page


def mlx_version() -> str | None:
    try:
        return metadata.version("mlx")
    except metadata.PackageNotFoundError:
        return None


def local_info() -> HostInfo:
    return HostInfo(
        hostname=socket.gethostname(),
        mlx_version=mlx_version(),
        specchat_version=__version__,
        free_memory=free_memory(),
        total_memory=physical_ram(),
        platform=f"{platform.system()} {platform.release()} {platform.machine()}",
        python=platform.python_version(),
    )


def probe_script(python: str = sys.executable, root: str = str(APP_ROOT)) -> str:
    """What runs on each machine, as the launcher starts a rank there: mlx.launch goes to this
    folder if it exists there, and the launcher runs the same Python with `app` found in `root`."""
    folder, path = shlex.quote(os.getcwd()), shlex.quote(root)
    return (
        f"if [ -d {folder} ]; then cd {folder}; fi; "
        f"export PYTHONPATH={path}; exec {shlex.quote(python)} -m app probe-host"
    )


def ssh_runner(host: str, script: str) -> list[str]:
    """ssh without prompts: a machine that would ask for a password fails at once, and says so.
    127.0.0.1 runs here without ssh, as mlx.launch does."""
    if host == "127.0.0.1":
        return ["bash", "-c", script]
    return [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={SSH_CONNECT_TIMEOUT}",
        "--",  # whatever follows is the machine, never an option
        host,
        script,
    ]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _reason(code: int, stderr: str) -> str:
    said = _last_line(stderr).removeprefix("ssh: ")[:200]
    if code == 255:  # ssh's own failures; a program run through it rarely exits with 255
        return f"Could not connect with ssh: {said or 'no reason given'}"
    if "invalid choice: 'probe-host'" in stderr:
        return "SpecChat there is an older version that cannot answer this test: update it"
    if "No module named" in stderr or code == 127 or "No such file or directory" in stderr:
        return f"SpecChat is not installed there in the same place as here ({said or 'not found'})"
    return f"The test program failed there (exit {code}): {said or 'no message'}"


def probe_host(host: str, runner: Runner, script: str, timeout: float) -> ProbeResult:
    if (problem := host_name_problem(host)) is not None:
        return ProbeResult(host, None, problem)
    argv = runner(host, script)
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False
        )
    except subprocess.TimeoutExpired:
        return ProbeResult(host, None, f"No answer within {timeout:g} s: is it awake and on this network?")
    except OSError as exc:
        return ProbeResult(host, None, f"Could not start {argv[0]}: {exc.strerror or exc}")
    if done.returncode != 0:
        return ProbeResult(host, None, _reason(done.returncode, done.stderr))
    reply = _last_line(done.stdout)
    try:
        info = HostInfo.from_json(json.loads(reply))
    except ValueError as exc:
        shown = reply[:80] or "nothing"
        return ProbeResult(host, None, f"It answered something unexpected ({exc}): {shown}")
    return ProbeResult(host, info)


def _versions(info: HostInfo) -> dict[str, str | None]:
    return {"MLX": info.mlx_version, "SpecChat": info.specchat_version}


def differing_versions(here: HostInfo, there: HostInfo) -> tuple[str, ...]:
    """Machines must run the same MLX and SpecChat: their ranks exchange raw arrays each step."""
    ours, theirs = _versions(here), _versions(there)
    return tuple(name for name in ours if ours[name] != theirs[name])


def version_mismatch(here: HostInfo, there: HostInfo) -> str | None:
    """The refusal in words, naming both versions of each that differs."""
    ours, theirs = _versions(here), _versions(there)
    problems = [
        f"{name} {theirs[name] or 'missing'} there but {ours[name] or 'missing'} on {this_machine()}"
        for name in differing_versions(here, there)
    ]
    if not problems:
        return None
    return "Versions differ: " + "; ".join(problems) + ". Install the same versions on every machine."


def _short_name(hostname: str) -> str:
    """A name without its domain: "Mac.local" and "mac" are one machine."""
    return hostname.split(".", 1)[0].lower()


def first_machine_note(here: HostInfo, results: Sequence[ProbeResult]) -> str | None:
    """The first machine runs the draft and is counted as this Mac: say so when it is another."""
    first = results[0].info if results else None
    if first is None:
        return None
    if _short_name(first.hostname) == _short_name(here.hostname):
        return None
    return (
        f"The first machine answered as {first.hostname}, but {this_machine()} is {here.hostname}: "
        f"list {this_machine()} first, since the first machine also runs the draft."
    )


def probe_hosts(
    hosts: Sequence[str],
    *,
    runner: Runner = ssh_runner,
    timeout: float = TIMEOUT,
    here: HostInfo | None = None,
    script: str | None = None,
    on_result: Callable[[ProbeResult], None] | None = None,
) -> list[ProbeResult]:
    """Ask the hosts, `AT_ONCE` at a time; results come back in `hosts` order, each also to
    `on_result` as soon as it is known."""
    here = here or local_info()
    script = script or probe_script()
    lock = threading.Lock()

    def one(host: str) -> ProbeResult:
        result = probe_host(host, runner, script, timeout)
        if result.info is not None:
            info = result.info
            result = ProbeResult(
                host, info, None, version_mismatch(here, info), differing_versions(here, info)
            )
        if on_result is not None:
            with lock:
                on_result(result)
        return result

    if not hosts:
        return []
    with ThreadPoolExecutor(
        max_workers=min(len(hosts), AT_ONCE), thread_name_prefix="specchat-probe"
    ) as pool:
        return list(pool.map(one, hosts))
