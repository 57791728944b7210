"""What a server is allowed to do: its address, its key and its caps."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from app.engine.protocol import SamplingParams, SpeculationSettings

MiB = 1024 * 1024
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class ConfigRefused(ValueError):
    """A configuration that would be unsafe or cannot work; its message is one line."""


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    if host.strip("[]") in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """`max_queue`: API requests waiting or running at once; one more is answered 429.
    `speculation`: what a request that names no `speculation` of its own decodes with."""

    host: str = "127.0.0.1"
    port: int = 8080  # 0: any free port
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()
    max_queue: int = 8
    max_body_bytes: int = 4 * MiB
    max_tokens_cap: int = 8192
    speculation: SpeculationSettings = field(default_factory=SpeculationSettings)
    sampling: SamplingParams = field(default_factory=SamplingParams)  # for what a request leaves out

    def check(self) -> None:
        """Refuse, in one line, what would expose the models or cannot run."""
        if not is_loopback(self.host) and not self.api_key:
            raise ConfigRefused(
                f"refusing to serve on {self.host} without an API key: other computers on the "
                "network could use your models; pass --api-key (or serve on 127.0.0.1)"
            )
        if not 0 <= self.port <= 65535:
            raise ConfigRefused(f"port {self.port} is not a port number (0 to 65535)")
        if self.max_queue < 1:
            raise ConfigRefused("the queue must hold at least one request")
