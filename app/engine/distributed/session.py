"""`ShardedPair`: a main model split across ranks, driven from the caller's process.

The ranks run in children of the caller (`mlx.launch` and what it starts), never in it: MLX's
collectives have no timeout, so a rank that dies or stops answering could hang a process
forever. Here the caller only reads rank 0's messages, with a deadline: no message for
max(`floor_s`, 20 times the slowest pass seen so far) means a rank is lost. Then the launcher's
process group is killed, the answer ends with an `EngineError` saying which rank (and host) was
lost where the launcher said so, and what was streamed before stays the caller's.
"""

from __future__ import annotations

import os
import queue
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from threading import Event
from typing import Any

from app.engine.decoding.decode import GenerationEvent
from app.engine.decoding.events import EngineError, ErrorKind, PrefillProgress, RoundEvent
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.templates.chat import TemplateError
from app.engine.distributed.launcher import Launch, launch_command
from app.engine.distributed.wire import Decoder, PolicySpec, RankInfo, encode, pack, unpack

PASS_FACTOR = 20  # a pass this many times slower than the slowest seen means a lost rank
_EOF: dict[str, Any] = {"t": "eof"}


def _plain(line: str) -> str:
    """A launcher line without its terminal colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", line).strip()


class RanksLost(RuntimeError):
    """The ranks can no longer answer (one died, hung, or never started); load the pair again."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the main's shards run: N local ranks, or the machines of an mlx.launch hostfile."""

    ranks: int | None = None
    hostfile: str | None = None


class ShardedPair:
    """A main model sharded over ranks (and a draft on rank 0), with the conversation its
    caches hold. Construct it to launch and load (it waits up to `load_timeout_s`); then
    `generate` answers like `decoding.decode.generate`; `close` ends the ranks."""

    def __init__(
        self,
        main: str | Path,
        draft: str | Path | None = None,
        placement: Placement | None = None,
        *,
        floor_s: float = 30.0,
        load_timeout_s: float = 900.0,
        python: str | None = None,
    ) -> None:
        placement = placement or Placement(ranks=2)
        rank_args = ["--main", os.fspath(main), *(["--draft", os.fspath(draft)] if draft else [])]
        command = launch_command(rank_args, ranks=placement.ranks, hostfile=placement.hostfile, python=python)
        self.floor_s = floor_s
        self.slowest_pass = 0.0
        self.ranks: list[RankInfo] = []
        self.ready: dict[str, Any] = {}
        self.lost: str | None = None
        self.closing: dict[str, Any] = {}
        self._prefill_seen = 0.0
        self._next_id = 0
        self._messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self._launch = Launch(command)
        threading.Thread(target=self._read, daemon=True).start()
        self._wait_ready(load_timeout_s)

    # -- reading rank 0 ------------------------------------------------------------------

    def _read(self) -> None:
        stdout = self._launch.process.stdout
        assert stdout is not None
        decoder = Decoder()
        for line in stdout:
            message = decoder.feed(line)
            if message is not None:
                self._messages.put(message)
        self._messages.put(_EOF)

    def _poll(self, timeout: float) -> dict[str, Any] | None:
        """Rank 0's next message, None after `timeout`; a rank that ended raises RanksLost."""
        try:
            message = self._messages.get(timeout=timeout)
        except queue.Empty:
            return None
        if message["t"] in ("eof", "fatal"):
            self._give_up(str(message.get("message", "the ranks stopped")))
        return message

    def _next(self, timeout: float) -> dict[str, Any]:
        """Rank 0's next message; silence past `timeout` means a lost rank (RanksLost)."""
        message = self._poll(timeout)
        if message is None:
            self._give_up(f"no word from the ranks for {timeout:.0f} s")
        assert message is not None
        return message

    def _give_up(self, why: str) -> None:
        self._launch.kill()
        lost = self._launch.lost_ranks()
        named = ""
        if lost and self.ready:  # at start rank 0's own report names the ranks that failed
            rank, how = lost[0]
            host = next((r.host for r in self.ranks if r.rank == rank), None)
            named = f"rank {rank}{f' ({host})' if host else ''} {how}; "
        elif (
            not lost and self._launch.errors
        ):  # the launcher itself failed (a bad hostfile, no ssh): its last word
            why += f" ({_plain(self._launch.errors[-1])})"
        start = "lost a rank" if self.ready else "could not start the ranks"
        self.lost = f"{start}: {named}{why}"
        raise RanksLost(self.lost)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            message = self._next(max(deadline - time.monotonic(), 0.001))
            if message["t"] == "hello":
                self.ranks = [RankInfo.from_text(text) for text in message["ranks"]]
            elif message["t"] == "ready":
                self.ready = message["ready"]
                return

    # -- the API ---------------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        """Each rank's process id, by rank (on its own machine)."""
        return [r.pid for r in self.ranks]

    @property
    def can_speculate(self) -> bool:
        return bool(self.ready.get("can_speculate"))

    @property
    def speculation_refusal(self) -> str | None:
        refusal = self.ready.get("speculation_refusal")
        return str(refusal) if refusal else None

    @property
    def context_length(self) -> int | None:
        """How many positions the main reads (its config's word), None where it does not say."""
        limit = self.ready.get("context_length")
        return int(limit) if limit is not None else None

    def _request(self, message: dict[str, Any]) -> int:
        if self.lost is not None:
            raise RanksLost(self.lost)
        self._next_id += 1
        self._launch.write(encode({**message, "id": self._next_id}))
        return self._next_id

    def _reply(self, request: int) -> dict[str, Any]:
        while True:
            message = self._next(self.deadline())
            if message.get("id") == request:
                return message

    def deadline(self) -> float:
        """How long to wait for rank 0's next word before calling a rank lost."""
        return max(self.floor_s, PASS_FACTOR * self.slowest_pass)

    def render(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """The conversation's token ids under the main's chat template (rendered on rank 0)."""
        reply = self._reply(self._request({"t": "render", "messages": [dict(m) for m in messages]}))
        if reply["t"] == "failed":
            error: EngineError = unpack(reply["error"])
            raise TemplateError(error.message)
        return [int(i) for i in reply["ids"]]

    def reset(self) -> None:
        """Forget the conversation the caches hold."""
        self._reply(self._request({"t": "reset"}))

    def generate(
        self,
        prompt_ids: Sequence[int],
        policy: PolicySpec | None = None,
        sampling: SamplingParams | None = None,
        max_tokens: int = 256,
        cancel: Event | None = None,
        *,
        stop_ids: Sequence[int] | None = None,
        acceptance: str | None = None,
    ) -> Iterator[GenerationEvent]:
        """The events `decoding.decode.generate` yields for this answer. A lost rank ends the
        stream with an EngineError instead of GenerationFinished; later calls raise RanksLost."""
        request = self._request(
            {
                "t": "generate",
                "ids": [int(i) for i in prompt_ids],
                "policy": {"mode": (policy or PolicySpec()).mode, "k": (policy or PolicySpec()).k},
                "sampling": pack(sampling),
                "max_tokens": max_tokens,
                "stop_ids": list(stop_ids) if stop_ids is not None else None,
                "acceptance": acceptance,
            }
        )
        ended = False
        self._prefill_seen = 0.0
        try:
            yield from self._stream(request, cancel)
            ended = True
        finally:
            if not ended and self.lost is None:  # the reader stopped early: let rank 0 stop too
                self._launch.write(encode({"t": "cancel", "id": request}))

    def _stream(self, request: int, cancel: Event | None) -> Iterator[GenerationEvent]:
        cancelled = False
        last = time.monotonic()
        while True:
            if cancel is not None and cancel.is_set() and not cancelled:
                self._launch.write(encode({"t": "cancel", "id": request}))
                cancelled = True
            try:
                message = self._poll(0.1)  # short waits, so a cancel is passed on promptly
                if message is None:
                    if time.monotonic() - last > self.deadline():
                        self._give_up(f"no word from the ranks for {self.deadline():.0f} s")
                    continue
            except RanksLost as exc:
                yield EngineError(str(exc), kind=ErrorKind.RANKS_LOST)
                return
            last = time.monotonic()
            if message.get("id") != request:
                continue
            if message["t"] == "failed":
                yield unpack(message["error"])
                return
            if message["t"] == "done":
                return
            event = unpack(message["e"])
            self._observe(event)
            yield event

    def _observe(self, event: object) -> None:
        if isinstance(event, RoundEvent):
            self.slowest_pass = max(self.slowest_pass, event.draft_seconds + event.verify_seconds)
        elif isinstance(event, PrefillProgress):  # seconds since the prefill began: a chunk is the step
            self.slowest_pass = max(self.slowest_pass, event.seconds - self._prefill_seen)
            self._prefill_seen = event.seconds

    def close(self, timeout: float = 30.0) -> dict[str, Any]:
        """Stop every rank; returns rank 0's last word (time it spent in command collectives)."""
        if self.lost is None:
            try:
                self._launch.write(encode({"t": "close"}))
                while (message := self._next(timeout))["t"] != "closed":
                    pass
                self.closing = message
            except (RanksLost, BrokenPipeError, OSError):
                pass
        self._launch.kill(grace=timeout if self.lost is None else 0.0)
        self.lost = self.lost or "closed"
        return self.closing

    def __enter__(self) -> ShardedPair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
