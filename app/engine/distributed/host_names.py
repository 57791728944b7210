"""Which machine names may reach ssh: host names, IP addresses and user@host, nothing else.

mlx.launch and the connection test hand the name to ssh, so a name that starts with `-` would
be read as one of ssh's options (`-oProxyCommand=...` runs a command here), and shell characters
could matter wherever a command line is built from it. Refusing everything else here, with the
reason in one line, keeps both out however ssh or the launcher change.
"""

from __future__ import annotations

import ipaddress
import re

MAX_NAME = 253  # the longest host name DNS allows
# letters, digits, `_` and `-` inside a label (ssh aliases and macOS names use both); never a
# leading `-`, which ssh would read as an option
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOST = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}")
_ZONE = re.compile(r"[A-Za-z0-9_.-]{1,32}")  # an IPv6 zone is an interface name, like bridge0
EXAMPLES = "use a name like studio.local, an address like 192.168.1.20, or user@studio.local"


def is_ip_address(text: str) -> bool:
    """An IPv4 or IPv6 address; an IPv6 one may name its interface (`fe80::1%bridge0`)."""
    address, percent, zone = text.partition("%")
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    if not percent:
        return True
    return parsed.version == 6 and _ZONE.fullmatch(zone) is not None


def _shown(text: str) -> str:
    """The name as the user can read it in one line: quoted, escaped, shortened."""
    shown = ascii(text[:40])
    return shown[:-1] + "…'" if len(text) > 40 else shown


def _why(text: str) -> str:
    """The first thing wrong with a refused name, most dangerous first."""
    user, at, host = text.rpartition("@")
    if not text:
        return "it is empty"
    if text.startswith("-") or host.startswith("-"):
        return "it starts with '-', which ssh would read as an option"
    odd = next((c for c in text if not (c.isascii() and (c.isalnum() or c in "._-@:%"))), None)
    if odd is not None:
        return f"it holds {odd!a}, which no machine name has"
    if len(text) > MAX_NAME:
        return f"it is longer than {MAX_NAME} characters"
    if at and _USER.fullmatch(user) is None:
        return "the part before '@' is not a user name"
    return "it is not a host name, an address, or user@host"


def host_name_problem(text: str) -> str | None:
    """Why `text` cannot be a machine's ssh name, in one line; None when it can be."""
    user, at, host = text.rpartition("@")
    name_ok = len(host) <= MAX_NAME and (is_ip_address(host) or _HOST.fullmatch(host) is not None)
    if name_ok and (not at or _USER.fullmatch(user) is not None):
        return None
    return f"{_shown(text)} is not a machine name ssh can use: {_why(text)}; {EXAMPLES}"
