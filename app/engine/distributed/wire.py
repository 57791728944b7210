"""Messages between the caller and rank 0, over the launcher's pipes.

The launcher (`mlx.launch`) joins every rank's stdout into its own and copies its stdin to every
rank, through ssh for another Mac. A message is one JSON object, base64-encoded and cut into
short lines, each tagged, so that a terminal's line limit on the way (ssh runs the ranks under a
pseudo-terminal, which also turns line ends into CRLF) and anything else a rank prints leave it
intact. Events are the decode loop's own dataclasses, pickled: both ends run the same SpecChat,
which the handshake checks before any event is sent.
"""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

TAG = "@specchat "
END = "@specchat. "
LINE = 700  # under macOS's 1024-byte canonical line limit of a terminal


def encode(message: dict[str, Any]) -> str:
    """One message as the lines to write (newline-terminated)."""
    text = base64.b64encode(json.dumps(message).encode()).decode()
    parts = [text[i : i + LINE] for i in range(0, len(text), LINE)] or [""]
    return "".join(f"{TAG}{p}\n" for p in parts[:-1]) + f"{END}{parts[-1]}\n"


class Decoder:
    """Reassemble messages from lines; lines without the tag are someone else's output."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def feed(self, line: str) -> dict[str, Any] | None:
        line = line.rstrip("\r\n")
        if line.startswith(END):
            self._parts.append(line[len(END) :])
            text, self._parts = "".join(self._parts), []
            message: dict[str, Any] = json.loads(base64.b64decode(text))
            return message
        if line.startswith(TAG):
            self._parts.append(line[len(TAG) :])
        return None


def decode_lines(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    decoder = Decoder()
    for line in lines:
        message = decoder.feed(line)
        if message is not None:
            yield message


def pack(value: object) -> str:
    return base64.b64encode(pickle.dumps(value)).decode()


def unpack(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))  # our own rank 0, versions checked


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """Which draft policy rank 0 runs: the API's modes (plain, fixed k, adaptive, lookup).

    Rank 0 keeps one adaptive controller per mode across answers, as `LoadedPair` does."""

    mode: str = "plain"
    k: int = 4


@dataclass(frozen=True, slots=True)
class RankInfo:
    """What each rank says about itself at the handshake."""

    rank: int
    host: str
    pid: int
    mlx: str
    specchat: str

    def versions(self) -> tuple[str, str]:
        return self.mlx, self.specchat

    def to_text(self) -> str:
        return json.dumps([self.rank, self.host, self.pid, self.mlx, self.specchat])

    @staticmethod
    def from_text(text: str) -> RankInfo:
        rank, host, pid, mlx, specchat = json.loads(text)
        return RankInfo(int(rank), str(host), int(pid), str(mlx), str(specchat))


def version_mismatch(infos: list[RankInfo]) -> str | None:
    """A sentence naming the ranks whose versions differ from rank 0's, or None."""
    first = infos[0]
    odd = [i for i in infos[1:] if i.versions() != first.versions()]
    if not odd:
        return None
    them = "; ".join(f"rank {i.rank} ({i.host}) runs MLX {i.mlx} and SpecChat {i.specchat}" for i in odd)
    return (
        f"the ranks run different versions: rank 0 ({first.host}) runs MLX {first.mlx} and SpecChat "
        f"{first.specchat}; {them}. Install the same versions on every machine"
    )


@dataclass
class Ready:
    """Rank 0's word that every rank loaded its shard."""

    ranks: list[RankInfo] = field(default_factory=list)
    main: str = ""
    draft: str | None = None
    can_speculate: bool = False
    speculation_refusal: str | None = None
    context_length: int | None = None
