"""`ShardedPair`: a main model split across ranks, driven from the caller's process.

The ranks run in children of the caller (`mlx.launch` and what it starts), never in it: MLX's
collectives have no timeout, so a rank that dies or stops answering could hang a process
forever. Here the caller only reads rank 0's messages, with a deadline: no message for
max(`floor_s`, 20 times the slowest pass seen so far) means a rank is lost. Then the launcher's
process group is killed, the answer ends with an `EngineError` saying which rank (and host) was
lost where the launcher said so, and what was streamed before stays the caller's.

Rank 0's messages come framed with this session's token (`wire.py`) and are rebuilt field by
field (`codec.py`); one that is framed right but cannot be read ends the session like a lost rank.
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
from typing import Any, NoReturn

from app.engine.decoding.decode import GenerationEvent
from app.engine.decoding.events import EngineError, ErrorKind, PrefillProgress, RoundEvent
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.templates.chat import TemplateError
from app.engine.distributed.codec import (
    BadMessage,
    error_from_data,
    event_from_data,
    sampling_data,
)
from app.engine.distributed.launcher import Launch, launch_command
from app.engine.distributed.wire import (
    SESSION,
    TO_RANKS,
    TOKEN_ENV,
    Decoder,
    PolicySpec,
    RankInfo,
    encode,
    new_token,
    read_lines,
)

PASS_FACTOR = 20  # a pass this many times slower than the slowest seen means a lost rank
MAX_STATE = 1 << 20  # characters of a controller's learnt state kept from rank 0 at most
_EOF: dict[str, Any] = {"t": "eof"}


def printable_line(line: str) -> str:
    """A launcher or rank line as text to show: no terminal colours, nor any other control
    character a machine on the list could use to rewrite the user's terminal."""
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    return "".join(c if c.isprintable() else " " for c in line).strip()[:2000]


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
        # the adaptive modes rank 0 has a controller for (it said what it learnt)
        self._controllers: set[str] = set()
        # what each mode's controller on rank 0 learnt, as of its last answer: the caller keeps it
        self.learnt: dict[str, dict[str, Any]] = {}
        self._messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self._token = new_token()
        self.refused = 0  # lines that looked like rank 0's messages but were not this session's
        self._launch = Launch(command, env={TOKEN_ENV: self._token})
        try:
            if placement.hostfile is not None:  # ssh carries no environment to another machine
                self._launch.write(f"{SESSION}{self._token}\n")
            threading.Thread(target=self._read, daemon=True).start()
            self._wait_ready(load_timeout_s)
        except BaseException:  # a Ctrl-C or a stop signal while loading, too: leave nothing behind
            self._launch.kill(grace=0.0)
            raise

    # -- reading rank 0 ------------------------------------------------------------------

    def _read(self) -> None:
        stdout = self._launch.process.stdout
        assert stdout is not None
        decoder = Decoder(self._token)
        for line in read_lines(stdout):
            message = decoder.feed(line)
            self.refused = decoder.refused
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
            said = message.get("message")
            self._give_up(said[:2000] if isinstance(said, str) else "the ranks stopped")
        return message

    def _next(self, timeout: float) -> dict[str, Any]:
        """Rank 0's next message; silence past `timeout` means a lost rank (RanksLost)."""
        message = self._poll(timeout)
        if message is None:
            self._give_up(f"no word from the ranks for {timeout:.0f} s")
        assert message is not None
        return message

    def _give_up(self, why: str) -> NoReturn:
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
            why += f" ({printable_line(self._launch.errors[-1])})"
        start = "lost a rank" if self.ready else "could not start the ranks"
        self.lost = f"{start}: {named}{printable_line(why)}"
        raise RanksLost(self.lost)

    def _unreadable(self, exc: Exception) -> NoReturn:
        self._give_up(f"rank 0 sent a message this SpecChat cannot read ({exc})")

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            message = self._next(max(deadline - time.monotonic(), 0.001))
            try:
                if message["t"] == "hello":
                    texts = message.get("ranks")
                    if not isinstance(texts, list) or not 0 < len(texts) <= 4096:
                        raise BadMessage("the handshake lists no ranks")
                    self.ranks = [RankInfo.from_text(text) for text in texts]
                elif message["t"] == "ready":
                    self.ready = _checked_ready(message.get("ready"))
                    return
            except ValueError as exc:
                self._unreadable(exc)

    # -- the API ---------------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        """Each rank's process id, by rank (on its own machine)."""
        return [r.pid for r in self.ranks]

    @property
    def exit_code(self) -> int | None:
        """The launcher's exit status once it has ended (0: every rank ended cleanly), else None."""
        return self._launch.process.returncode

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

    def _send(self, message: dict[str, Any]) -> None:
        """A command to rank 0; one the launcher can no longer take is dropped (it is gone, and
        the next read says so)."""
        try:
            self._launch.write(encode(message, self._token, TO_RANKS))
        except (BrokenPipeError, OSError):
            pass

    def _request(self, message: dict[str, Any]) -> int:
        if self.lost is not None:
            raise RanksLost(self.lost)
        self._next_id += 1
        self._send({**message, "id": self._next_id})
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
        try:
            if reply["t"] == "failed":
                error = error_from_data(reply.get("error"))
            else:
                ids = reply.get("ids")
                if not isinstance(ids, list) or not all(type(i) is int and i >= 0 for i in ids):
                    raise BadMessage("the rendered conversation is not a list of token ids")
                return list(ids)
        except BadMessage as exc:
            self._unreadable(exc)
        raise TemplateError(error.message)

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
        saved_state: Mapping[str, Any] | None = None,
    ) -> Iterator[GenerationEvent]:
        """The events `decoding.decode.generate` yields for this answer. A lost rank ends the
        stream with an EngineError instead of GenerationFinished; later calls raise RanksLost.
        `saved_state` is where an adaptive mode's controller starts, read with the mode's first
        answer only (rank 0 keeps the controller after); what it learnt lands in `learnt`."""
        spec = policy or PolicySpec()
        offered = (
            dict(saved_state) if saved_state is not None and spec.mode not in self._controllers else None
        )
        request = self._request(
            {
                "t": "generate",
                "ids": [int(i) for i in prompt_ids],
                "policy": {"mode": spec.mode, "k": spec.k},
                "state": offered,
                "sampling": sampling_data(sampling),
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
                self._send({"t": "cancel", "id": request})

    def _stream(self, request: int, cancel: Event | None) -> Iterator[GenerationEvent]:
        cancelled = False
        last = time.monotonic()
        while True:
            if cancel is not None and cancel.is_set() and not cancelled:
                self._send({"t": "cancel", "id": request})
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
            if message["t"] == "done":
                return
            if message["t"] == "learnt":
                self._keep_learnt(message)
                continue
            try:
                if message["t"] == "failed":
                    yield error_from_data(message.get("error"))
                    return
                if message["t"] != "event":
                    continue
                event = event_from_data(message.get("e"))
            except BadMessage as exc:
                try:
                    self._unreadable(exc)
                except RanksLost as lost:
                    yield EngineError(str(lost), kind=ErrorKind.RANKS_LOST)
                return
            self._observe(event)
            yield event

    def has_controller(self, mode: str) -> bool:
        """Whether rank 0 keeps a controller for `mode` already (a saved state offered now
        would not be read)."""
        return mode in self._controllers

    def _keep_learnt(self, message: dict[str, Any]) -> None:
        """Rank 0's controller state after an answer; it is checked field by field where it is
        restored, so here only its shape and size (a state is a few kilobytes)."""
        mode, state = message.get("mode"), message.get("state")
        if isinstance(mode, str) and isinstance(state, dict) and len(str(state)) <= MAX_STATE:
            self.learnt[mode] = state
            self._controllers.add(mode)

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
                self._send({"t": "close"})
                while (message := self._next(timeout))["t"] != "closed":
                    pass
                self.closing = message
            except (RanksLost, BrokenPipeError, OSError):
                pass
        self._launch.kill(grace=timeout if self.lost is None else 0.0)
        self.lost = self.lost or "closed"
        return self.closing

    def stop_now(self) -> None:
        """End the launcher and every rank at once (the caller is being stopped)."""
        self._launch.kill(grace=0.0)
        self.lost = self.lost or "stopped"

    def __enter__(self) -> ShardedPair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _checked_ready(data: object) -> dict[str, Any]:
    """Rank 0's ready word, only the fields the caller reads, each of its type."""
    if not isinstance(data, dict):
        raise BadMessage("the ready message is not a mapping")
    refusal, limit = data.get("speculation_refusal"), data.get("context_length")
    if refusal is not None and not isinstance(refusal, str):
        raise BadMessage("the speculation refusal is not text")
    if limit is not None and (type(limit) is not int or limit <= 0):
        raise BadMessage("the context length is not a positive whole number")
    return {
        "can_speculate": data.get("can_speculate") is True,
        "speculation_refusal": refusal[:2000] if refusal else None,
        "context_length": limit,
    }
