"""The machines a split main model runs on: mlx.launch's JSON hostfile, read and checked.

The ring backend speaks plain, unauthenticated TCP, so which network it binds to matters:
`is_private_link` tells a cable or home network from one anyone nearby could reach.

A machine list is read before anything else runs, so its size and shape are bounded first: at
most `MAX_HOSTFILE_BYTES` read, `MAX_MACHINES` machines of `MAX_ADDRESSES` addresses each, and
every machine name one ssh can only read as a name (`host_names`).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.engine.distributed.host_names import host_name_problem, is_ip_address
from app.engine.library.paths import app_data_dir
from app.engine.platform_words import this_machine

# Thunderbolt bridges pick link-local addresses; RFC 1918 covers home networks.
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
        "127.0.0.0/8",
        "::1/128",
        "fe80::/10",
        "fd00::/8",
    )
)


MAX_HOSTFILE_BYTES = 256 * 1024  # dozens of machines take a few kilobytes
MAX_MACHINES = 64  # more than any model's key-value heads split over
MAX_ADDRESSES = 16  # per machine
MAX_ENVS = 64
NOT_PRIVATE = (
    "This connection is not private: anyone on this network could connect. "
    "Use Thunderbolt or your home network."
)


class HostfileError(ValueError):
    """A hostfile that cannot be used; the message says what to fix, in plain words."""


@dataclass(frozen=True, slots=True)
class HostEntry:
    ssh: str  # the name ssh connects to
    ips: tuple[str, ...]  # where the ring backend listens on that machine


@dataclass(frozen=True, slots=True)
class Hostfile:
    """The machines in rank order: the first one is this Mac, which also runs the draft."""

    hosts: tuple[HostEntry, ...]
    backend: str = ""
    envs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "envs": list(self.envs),
            "hosts": [{"ssh": h.ssh, "ips": list(h.ips)} for h in self.hosts],
        }

    def with_local_ip(self, ip: str) -> Hostfile:
        """The same machines with this Mac (the first) listening on `ip` only."""
        first = replace(self.hosts[0], ips=(ip,))
        return replace(self, hosts=(first, *self.hosts[1:]))

    def public_links(self) -> list[tuple[str, str]]:
        """(machine, address) for every address that is not on a private link."""
        return [(h.ssh, ip) for h in self.hosts for ip in h.ips if not is_private_link(ip)]

    def public_warning(self) -> str | None:
        """The warning the window shows for addresses anyone nearby could reach; None if none."""
        public = [f"{host} at {ip}" for host, ip in self.public_links()]
        return f"{NOT_PRIVATE} ({'; '.join(public)})" if public else None


def is_private_link(ip: str) -> bool:
    """Whether `ip` is on a network only nearby machines share (loopback, link-local, home)."""
    try:
        address = ipaddress.ip_address(ip.split("%", 1)[0])  # drop an IPv6 zone like %bridge0
    except ValueError:
        return False
    return any(address.version == n.version and address in n for n in PRIVATE_NETWORKS)


def default_hostfile_path() -> Path:
    """Where the app writes the hostfile for machines typed into its window."""
    return app_data_dir() / "hostfile.json"


def _too_big(source: str, size: int) -> HostfileError:
    return HostfileError(
        f"{source} is {size // 1024:,} KB: a machine list is at most {MAX_HOSTFILE_BYTES // 1024} KB "
        f"and {MAX_MACHINES} machines. Is it the right file?"
    )


def read_hostfile(path: Path) -> Hostfile:
    """The machine list at `path`; only its first `MAX_HOSTFILE_BYTES` (and one more) are read."""
    path = Path(path)
    if not path.is_file():
        raise HostfileError(f"The machine list {os.fsdecode(path)} does not exist.")
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_HOSTFILE_BYTES + 1)
        if len(raw) > MAX_HOSTFILE_BYTES:
            raise _too_big(f"The machine list {path}", path.stat().st_size)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HostfileError(f"The machine list {path} could not be read ({exc}).") from exc
    return parse_hostfile(text, str(path))


def parse_hostfile(text: str, source: str = "The machine list") -> Hostfile:
    """Parse mlx.launch's format: a list of hosts, or an object with `hosts`, `backend`, `envs`.
    The size and the shape are checked before any machine is looked at."""
    if len(text) > MAX_HOSTFILE_BYTES:
        raise _too_big(source, len(text.encode("utf-8", "replace")))
    try:
        data = json.loads(text)
    except RecursionError as exc:  # [[[[...]]]]: no machine list is nested like this
        raise HostfileError(f"{source} is nested too deeply to be a machine list.") from exc
    except ValueError as exc:
        raise HostfileError(f"{source} is not valid JSON: {exc}.") from exc
    backend, envs = "", []
    if isinstance(data, dict):
        backend, envs, data = data.get("backend", ""), data.get("envs", []), data.get("hosts")
        if not isinstance(backend, str) or not isinstance(envs, list):
            raise HostfileError(f"{source}: 'backend' must be text and 'envs' a list.")
        if len(envs) > MAX_ENVS or not all(isinstance(e, str) for e in envs):
            raise HostfileError(f"{source}: 'envs' must be at most {MAX_ENVS} settings like NAME=value.")
    if not isinstance(data, list):
        raise HostfileError(f'{source} must hold a list of machines, like [{{"ssh": "name", "ips": [...]}}].')
    if len(data) > MAX_MACHINES:
        raise HostfileError(
            f"{source} lists {len(data):,} machines; at most {MAX_MACHINES} can share a model."
        )
    hosts = tuple(_entry(item, i, source) for i, item in enumerate(data))
    return _checked(Hostfile(hosts, backend, tuple(envs)), source)


def _entry(item: object, index: int, source: str) -> HostEntry:
    where = f"{source}, machine {index + 1}"
    if not isinstance(item, dict):
        raise HostfileError(f"{where} must be an object with 'ssh' and 'ips'.")
    ssh, ips = item.get("ssh"), item.get("ips", [])
    if not isinstance(ssh, str) or not ssh.strip():
        raise HostfileError(f"{where} has no ssh name: say which machine to connect to.")
    if (problem := host_name_problem(ssh.strip())) is not None:
        raise HostfileError(f"{where}: {problem}.")
    if not isinstance(ips, list) or not all(isinstance(ip, str) for ip in ips):
        raise HostfileError(f"{where} ({ssh}): 'ips' must be a list of addresses.")
    if len(ips) > MAX_ADDRESSES:
        raise HostfileError(f"{where} ({ssh}) lists {len(ips):,} addresses; at most {MAX_ADDRESSES}.")
    return HostEntry(ssh.strip(), tuple(ip.strip() for ip in ips))


def parse_host_lines(text: str) -> Hostfile:
    """Machines typed one per line: the ssh name, then the address the connection uses."""
    if len(text) > MAX_HOSTFILE_BYTES:
        raise _too_big("The machine list", len(text.encode("utf-8", "replace")))
    hosts: list[HostEntry] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(hosts) == MAX_MACHINES:
            raise HostfileError(
                f"The machine list names more than {MAX_MACHINES} machines; at most {MAX_MACHINES} can share a model."
            )
        if (problem := host_name_problem(words[0])) is not None:
            raise HostfileError(f"The machine list: {problem}.")
        if len(words) > MAX_ADDRESSES + 1:
            raise HostfileError(f"The machine list: {words[0]} has more than {MAX_ADDRESSES} addresses.")
        if len(words) == 1 and is_ip_address(words[0]):
            hosts.append(HostEntry(words[0], (words[0],)))  # an address is its own ssh name
        else:
            hosts.append(HostEntry(words[0], tuple(words[1:])))
    return _checked(Hostfile(tuple(hosts)), "The machine list")


def _checked(hostfile: Hostfile, source: str) -> Hostfile:
    if not hostfile.hosts:
        raise HostfileError(f"{source} names no machines: add at least two, {this_machine()} first.")
    seen: set[str] = set()
    for host in hostfile.hosts:
        if host.ssh.lower() in seen:
            raise HostfileError(f"{source} names {host.ssh} twice: list each machine once.")
        seen.add(host.ssh.lower())
        if not host.ips:
            raise HostfileError(
                f"{source}: {host.ssh} has no IP address; the connection between machines needs one."
            )
        for ip in host.ips:
            if not is_ip_address(ip):
                raise HostfileError(f"{source}: '{ip}' ({host.ssh}) is not an IP address.")
    return hostfile


def write_hostfile(hostfile: Hostfile, path: Path) -> Path:
    """Write atomically, so mlx.launch never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(hostfile.to_json(), indent=2) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


@dataclass(frozen=True, slots=True)
class LocalAddress:
    interface: str
    ip: str

    @property
    def private(self) -> bool:
        return is_private_link(self.ip)


_IFCONFIG_NAME = re.compile(r"^([A-Za-z0-9_.:-]+?):?\s")
_IFCONFIG_INET = re.compile(r"^\s+inet6?\s+(?:addr:)?([0-9A-Fa-f.:%a-z]+)")


def parse_ifconfig(text: str) -> list[LocalAddress]:
    """Addresses from `ifconfig` output (macOS and Linux net-tools)."""
    found, interface = [], ""
    for line in text.splitlines():
        if line and not line[0].isspace():
            match = _IFCONFIG_NAME.match(line)
            interface = match.group(1) if match else ""
        elif (match := _IFCONFIG_INET.match(line)) and interface:
            found.append(LocalAddress(interface, match.group(1)))
    return found


def parse_ip_addr(text: str) -> list[LocalAddress]:
    """Addresses from Linux `ip -o addr` output."""
    found = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 4 and words[2] in ("inet", "inet6"):
            found.append(LocalAddress(words[1], words[3].split("/", 1)[0]))
    return found


def local_addresses() -> list[LocalAddress]:
    """This machine's addresses, private links first, so the likely choice is on top."""
    for tool, args, parse in (("ifconfig", [], parse_ifconfig), ("ip", ["-o", "addr"], parse_ip_addr)):
        if (exe := shutil.which(tool)) is None:
            continue
        try:
            out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=5, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        if found := parse(out.stdout):
            usable = [a for a in found if not a.ip.startswith("127.") and a.ip != "::1"]
            return sorted(usable or found, key=lambda a: (not a.private, ":" in a.ip, a.interface))
    return []
