"""Telling "offline" apart from other download failures, in words, within a few seconds.

Without this an unreachable hub shows as a long wait (the HTTP client's own retries and timeouts)
followed by a raw errno. One short TCP connect before anything else answers the common case at
once, and `offline_message` words a connection failure met later the same way.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from urllib.parse import urlsplit

CONNECT_SECONDS = 3.0  # long enough for a slow network, short enough to say "offline" promptly

Connect = Callable[[tuple[str, int], float], object]


def hub_host(endpoint: str | None) -> tuple[str, int]:
    """The host and port a download from `endpoint` (None: the hub huggingface_hub uses) talks to."""
    if endpoint is None:
        from huggingface_hub import constants

        endpoint = constants.ENDPOINT
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname or "huggingface.co", port


def offline_message(host: str) -> str:
    return f"You appear to be offline: SpecChat could not reach {host}."


def _connect(address: tuple[str, int], timeout: float) -> object:
    connection = socket.create_connection(address, timeout=timeout)
    connection.close()
    return connection


def unreachable(endpoint: str | None, connect: Connect = _connect) -> str | None:
    """The offline sentence when the hub cannot be reached now, else None. One attempt, no retry:
    a name that does not resolve or a refused connection answers at once, silence in seconds."""
    host, port = hub_host(endpoint)
    try:
        connect((host, port), CONNECT_SECONDS)
    except OSError:
        return offline_message(host)
    return None


def is_connection_failure(exc: BaseException) -> bool:
    """Whether `exc`, or what caused it, is a failure to reach the server (not an answer from it)."""
    kinds: tuple[type[BaseException], ...] = (ConnectionError, socket.gaierror)
    try:  # huggingface_hub's HTTP client; its connection errors are not the built-in one
        from requests.exceptions import ConnectionError as RequestsConnectionError

        kinds += (RequestsConnectionError,)  # ConnectTimeout is one of these
    except ImportError:
        pass
    seen: BaseException | None = exc
    for _ in range(8):  # a cause chain is short; a loop in it must not hang
        if seen is None:
            return False
        if isinstance(seen, kinds):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
