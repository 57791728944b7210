"""Messages between the caller and rank 0, over the launcher's pipes.

The launcher (`mlx.launch`) joins every rank's stdout into its own and copies its stdin to every
rank, through ssh for another Mac. So a message is framed: one JSON object, base64-encoded and cut
into short lines, each carrying a direction tag, the session's token (a random secret the caller
gives rank 0 in its environment) and the line's place in the message. A terminal's line limit on
the way (ssh runs the ranks under a pseudo-terminal, which also turns line ends into CRLF) leaves
it intact, and whatever else prints on a rank's machine cannot pass for a message: a line without
the token, out of order, or that does not decode to a JSON object is dropped and counted. JSON is
data only: nothing read here can run code, and each field is checked where it is used
(`codec.py` for the decode loop's events).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import secrets
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

TO_CALLER = "@specchat<"  # rank 0's messages
TO_RANKS = "@specchat>"  # the caller's commands (never read back as rank 0's, even if echoed)
SESSION = "@specchat-session "  # the token, on stdin, for ranks whose environment lacks it (ssh)
TOKEN_ENV = "SPECCHAT_SESSION_TOKEN"
LINE = 700  # base64 characters a line holds: under macOS's 1024-byte terminal line limit
MAX_MESSAGE = 16 << 20  # base64 characters one message may hold
MAX_PARTS = MAX_MESSAGE // LINE + 1
READ_LIMIT = 4096  # characters read as one line at most: a longer one is someone else's output
_B64 = frozenset(string.ascii_letters + string.digits + "+/=")


def new_token() -> str:
    """A fresh session token: 128 random bits as hex."""
    return secrets.token_hex(16)


def encode(message: dict[str, Any], token: str, tag: str = TO_CALLER) -> str:
    """One message as the lines to write (newline-terminated)."""
    text = base64.b64encode(json.dumps(message).encode()).decode()
    parts = [text[i : i + LINE] for i in range(0, len(text), LINE)] or [""]
    return "".join(f"{tag} {token} {i} {len(parts)} {part}\n" for i, part in enumerate(parts))


def _count(text: str, limit: int) -> int | None:
    """A small non-negative decimal, None for anything else."""
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        return None
    value = int(text)
    return value if value < limit else None


class Decoder:
    """Reassemble one direction's messages from lines. Lines without its tag are someone else's
    output and pass by; a tagged line that is not this session's or breaks the frame is refused
    (counted in `refused`), and so is a whole message that is not a JSON object with a string `t`."""

    def __init__(self, token: str, tag: str = TO_CALLER) -> None:
        self._token = token.encode()
        self._prefix = tag + " "
        self._parts: list[str] = []
        self._total = 0
        self.refused = 0

    def _refuse(self) -> None:
        self.refused += 1
        self._parts, self._total = [], 0

    def feed(self, line: str) -> dict[str, Any] | None:
        line = line.rstrip("\r\n")
        if not line.startswith(self._prefix):
            return None
        fields = line[len(self._prefix) :].split(" ")
        if len(fields) != 4:
            self._refuse()
            return None
        token, index_text, total_text, part = fields
        if not hmac.compare_digest(token.encode("utf-8", "replace"), self._token):
            self.refused += 1  # not this session's: leave a message in progress alone
            return None
        total = _count(total_text, MAX_PARTS + 1)
        index = _count(index_text, total or 0)
        if total is None or index is None or len(part) > LINE or not _B64.issuperset(part):
            self._refuse()
            return None
        if index == 0:
            if self._parts:
                self.refused += 1  # the message before was cut short
            self._parts, self._total = [], total
        elif index != len(self._parts) or total != self._total:
            self._refuse()
            return None
        self._parts.append(part)
        if len(self._parts) < self._total:
            return None
        text = "".join(self._parts)
        self._parts, self._total = [], 0
        return self._message(text)

    def _message(self, text: str) -> dict[str, Any] | None:
        try:
            message = json.loads(base64.b64decode(text, validate=True))
        except (ValueError, binascii.Error, RecursionError):  # not JSON, not UTF-8, too deep
            message = None
        if not isinstance(message, dict) or not isinstance(message.get("t"), str):
            self.refused += 1
            return None
        return message


def read_lines(stream: IO[str]) -> Iterator[str]:
    """A text stream's lines, each at most READ_LIMIT characters (a longer one comes in pieces,
    which the decoder then takes for someone else's output), so no line can exhaust memory."""
    while line := stream.readline(READ_LIMIT):
        yield line


def decode_lines(lines: Iterator[str], token: str, tag: str = TO_CALLER) -> Iterator[dict[str, Any]]:
    decoder = Decoder(token, tag)
    for line in lines:
        message = decoder.feed(line)
        if message is not None:
            yield message


def read_session_token(stream: IO[str], lines: int = 1000) -> str | None:
    """The token the caller wrote on stdin, for a rank whose environment does not carry it."""
    for _ in range(lines):
        line = stream.readline(READ_LIMIT)
        if not line:
            return None
        if line.startswith(SESSION):
            token = line[len(SESSION) :].strip()
            return token if token.isascii() and token.isalnum() else None
    return None


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """Which draft policy rank 0 runs: a `SpeculationMode`'s word (off, fixed k, adaptive,
    lookup; "plain" is still read as off), parsed there with `SpeculationMode.parse`.

    Rank 0 keeps one adaptive controller per mode across answers, as `LoadedPair` does."""

    mode: str = "off"
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
    def from_text(text: object) -> RankInfo:
        """The handshake's five fields, typed; ValueError for anything else (a rank sent it)."""
        try:
            fields = json.loads(text) if isinstance(text, str) else None
        except (ValueError, RecursionError):
            fields = None
        if not isinstance(fields, list) or len(fields) != 5:
            raise ValueError("a rank's description is not five fields")
        rank, host, pid, mlx, specchat = fields
        if type(rank) is not int or type(pid) is not int:
            raise ValueError("a rank's number or process id is not a number")
        if not all(isinstance(v, str) and len(v) <= 255 for v in (host, mlx, specchat)):
            raise ValueError("a rank's host or versions are not short text")
        return RankInfo(rank, host, pid, mlx, specchat)


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
