"""Rank 0's side of the conversation with the caller: render, generate, cancel, reset, close.

Rank 0 runs the app's own decode loop (`decoding.decode.generate`) over a `ChatSession` whose
main is the sharded one, so what it streams is what one process would. A thread reads the
caller's commands, so a cancel reaches an answer between its rounds.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import asdict, replace
from threading import Event
from typing import IO, Any

from app.engine.decoding.context import ContextTooLong, answer_room, context_length
from app.engine.decoding.decode import generate
from app.engine.decoding.events import EngineError, ErrorKind, RoundEvent
from app.engine.decoding.loading import ModelPair
from app.engine.decoding.policy import DraftPolicy
from app.engine.decoding.session import ChatSession
from app.engine.decoding.templates.chat import TemplateError, format_chat
from app.engine.distributed.codec import BadMessage, event_data, sampling_from_data
from app.engine.distributed.collective import ShardedMain
from app.engine.distributed.wire import TO_RANKS, Decoder, PolicySpec, Ready, encode, read_lines
from app.engine.policy.modes import PairPolicies, SavedState, SpeculationMode


class Output:
    """Messages to the caller, framed with the session's token, on the stream that carries
    nothing else (rank 0's own stdout; everything else it prints goes to stderr)."""

    def __init__(self, stream: IO[str], token: str) -> None:
        self._stream = stream
        self._token = token
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        with self._lock:
            self._stream.write(encode(message, self._token))
            self._stream.flush()


def _request_id(message: dict[str, Any]) -> int:
    value = message.get("id", -1)
    return value if type(value) is int else -1


def _read_commands(
    stream: IO[str], token: str, commands: queue.Queue[tuple[dict[str, Any], Event] | None]
) -> None:
    """The caller's commands in order; a cancel is applied at once to the answer it names."""
    decoder = Decoder(token, TO_RANKS)
    cancels: dict[int, Event] = {}
    for line in read_lines(stream):
        message = decoder.feed(line)
        if message is None:
            continue
        if message["t"] == "cancel":
            cancels.setdefault(_request_id(message), Event()).set()
            continue
        flag = cancels.setdefault(_request_id(message), Event())
        commands.put((message, flag))
    commands.put(None)  # the caller is gone: stop the ranks


class RankServer:
    """Rank 0's side of a sharded session: answers the caller's commands over the ranks."""

    def __init__(self, pair: ModelPair, sharded: ShardedMain, out: Output) -> None:
        self.pair, self.sharded, self.out = pair, sharded, out
        self.session = ChatSession(pair)
        # adaptive controllers kept across answers, as the app's; each starts from the state
        # the caller offered with its mode's first answer (rank 0 has no store of its own)
        self._offered: dict[SpeculationMode, SavedState] = {}
        self.policies = PairPolicies(load=lambda mode: self._offered.pop(mode, None))

    def policy(self, spec: PolicySpec) -> DraftPolicy:
        """The caller's mode in the app's words ("plain" still means off); an unknown one is
        a ValueError that names the choices."""
        return self.policies.policy(SpeculationMode.parse(spec.mode), spec.k)

    def failed(self, request: int, error: EngineError) -> None:
        self.out.send({"t": "failed", "id": request, "error": event_data(error)})

    def handle(self, message: dict[str, Any], cancel: Event) -> None:
        request = _request_id(message)
        kind = message["t"]
        if kind == "render":
            try:
                ids = format_chat(self.pair.tokenizer, list(message["messages"]))
            except TemplateError as exc:
                self.failed(request, EngineError(str(exc), kind=ErrorKind.TEMPLATE))
                return
            self.out.send({"t": "rendered", "id": request, "ids": ids})
        elif kind == "reset":
            self.session.reset()
            self.out.send({"t": "done", "id": request})
        elif kind == "generate":
            self.generate(request, message, cancel)
        else:
            self.failed(request, EngineError(f"unknown command {kind!r}", kind=ErrorKind.STATE))

    def generate(self, request: int, message: dict[str, Any], cancel: Event) -> None:
        ids = [int(i) for i in message["ids"]]
        try:
            limit = context_length(self.pair.main.config)
            max_tokens = answer_room(len(ids), int(message["max_tokens"]), limit)
            spec = PolicySpec(str(message["policy"]["mode"]), int(message["policy"]["k"]))
            mode = SpeculationMode.parse(spec.mode)
            offered = message.get("state")
            if isinstance(offered, dict) and mode.adaptive:  # checked field by field on restore
                self._offered[mode] = offered
            policy = self.policy(spec)
            sampling = sampling_from_data(message.get("sampling"))
        except ContextTooLong as exc:
            self.failed(request, EngineError(str(exc), kind=ErrorKind.CONTEXT))
            return
        except (ValueError, KeyError, TypeError, BadMessage) as exc:
            self.failed(request, EngineError(str(exc), kind=ErrorKind.STATE))
            return
        events = generate(
            self.session,
            ids,
            sampling=sampling,
            policy=policy,
            max_tokens=max_tokens,
            cancel=cancel,
            stop_ids=message.get("stop_ids"),
            acceptance=message.get("acceptance"),
        )
        for event in events:
            if isinstance(event, RoundEvent) and event.accepted < len(event.proposed):
                # the refused drafts as text: the caller has no tokenizer
                refused = str(self.pair.tokenizer.decode(list(event.proposed[event.accepted :])))
                event = replace(event, refused_text=refused)
            self.out.send({"t": "event", "id": request, "e": event_data(event)})
        learnt = self.policies.learnt(mode)
        if learnt is not None:  # what the controller learnt, for the caller to keep
            self.out.send({"t": "learnt", "id": request, "mode": mode.value, "state": learnt})
        self.out.send({"t": "done", "id": request})


def serve(
    pair: ModelPair,
    sharded: ShardedMain,
    ready: Ready,
    out: Output,
    stdin: IO[str],
    token: str,
) -> None:
    """Answer the caller's commands until it closes (or goes away), then stop the followers."""
    server = RankServer(pair, sharded, out)
    ready.can_speculate = server.session.can_speculate
    ready.speculation_refusal = server.session.speculation_refusal
    ready.context_length = context_length(pair.main.config)
    out.send({"t": "ready", "ready": {**asdict(ready), "ranks": [r.to_text() for r in ready.ranks]}})
    commands: queue.Queue[tuple[dict[str, Any], Event] | None] = queue.Queue()
    threading.Thread(target=_read_commands, args=(stdin, token, commands), daemon=True).start()
    try:
        while (item := commands.get()) is not None and item[0]["t"] != "close":
            server.handle(*item)
        sharded.stop()
    except Exception as exc:
        out.send({"t": "fatal", "message": f"{type(exc).__name__}: {exc}"})
        raise
    channel = sharded.channel
    out.send({"t": "closed", "collective_seconds": channel.seconds, "collectives": channel.calls})
