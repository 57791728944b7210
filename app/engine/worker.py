"""The engine's one worker thread: it owns every MLX object (models, caches, streams).

MLX streams belong to the thread that created them, so loading and generating both happen here.
Callers submit the commands of protocol.py and receive `WorkerMessage`s through a callback that
the worker calls on its own thread; the UI forwards them to the GUI thread. Nothing here blocks
the caller except `shutdown`.

It is one module past 400 lines because the queue, its cancellation and every command's handler
share the thread's state (the loaded pair, its session, a main split across machines); the work
each command does lives in decoding/, features/ and distributed/.
"""

from __future__ import annotations

import dataclasses
import itertools
import queue
import threading
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import mlx.core as mx

from app.engine.decoding.context import (
    CHAT_ADVICE,
    PROMPT_ADVICE,
    ContextTooLong,
    context_length,
    fit_conversation,
)
from app.engine.decoding.decode import generate
from app.engine.decoding.loading import ModelLoadError, ModelPair, release_memory
from app.engine.decoding.session import ChatSession
from app.engine.decoding.shapes.buckets import on_gpu
from app.engine.decoding.templates.chat import TemplateError, format_chat
from app.engine.decoding.templates.renderer import close_renderers
from app.engine.distributed.preflight import SplitRefused, check_split
from app.engine.distributed.session import Placement, RanksLost, ShardedPair
from app.engine.distributed.wire import PolicySpec
from app.engine.features.arena import run_arena_job
from app.engine.features.baselines import Preemptible, filler_ids, measure_plain
from app.engine.features.lossless import check_answer
from app.engine.library.pairing import load_checked_pair
from app.engine.library.store import Store
from app.engine.policy.adaptive import MAX_K
from app.engine.policy.modes import PairPolicies, remembered
from app.engine.policy.warmup import compile_pass_shapes, compiles_per_shape, warm_up_steps
from app.engine.protocol import (
    CheckLossless,
    Command,
    ContextOverflow,
    Device,
    EngineError,
    ErrorKind,
    Generate,
    GenerationContext,
    LoadPair,
    LoadQueued,
    LoadStarted,
    MeasureBaseline,
    PairLoaded,
    Reply,
    ResetSession,
    RoundEvent,
    RunArena,
    WarmUpProgress,
    WorkerMessage,
)
from app.engine.thread_exit import wait_until_gone

_NOT_LOADED = "the load was cancelled before it began; the models loaded before stay loaded"
# seconds a load waits before it says so: a command's last steps after its final reply are no wait
ANNOUNCE_AFTER = 0.25


class EngineWorker:
    """Runs commands one at a time on a daemon thread; `cancel` interrupts the current one."""

    def __init__(
        self,
        emit: Callable[[WorkerMessage], None],
        *,
        name: str = "specchat-engine",
        memory: Store | None = None,
    ) -> None:
        self._emit = emit
        # where adaptive controllers keep what they learnt about a pair across sessions (None: nowhere)
        self._memory = memory
        self._loaded: tuple[str, str | None] = ("", None)
        self._queue: queue.Queue[tuple[int, Command] | None] = queue.Queue()  # None: stop
        self._ids = itertools.count(1)
        self._cancel = threading.Event()
        # which request runs, and those cancelled before they started (the GUI thread cancels,
        # this one starts commands: the lock orders the two)
        self._lock = threading.Lock()
        self._running: int | None = None
        self._running_command: Command | None = None
        self._last_started = 0
        self._cancelled_early: set[int] = set()
        self._queued_loads: set[int] = set()  # loads that said `LoadQueued`, to say `LoadStarted`
        # requests whose replies go to a sink of their own (the local API's), not to `emit`
        self._sinks: dict[int, Callable[[WorkerMessage], None]] = {}
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._pair: ModelPair | None = None
        self._session: ChatSession | None = None
        self._policies = PairPolicies()  # the loaded pair's, its adaptive controllers in `memory`
        self._sharded: ShardedPair | None = None  # a main split across ranks, in child processes

    def start(self) -> None:
        self._thread.start()

    def submit(self, command: Command, sink: Callable[[WorkerMessage], None] | None = None) -> int:
        """Queue `command`; its request id comes back at once. With `sink`, every reply to this
        request goes there instead of to `emit` (the local API serves through the window's
        worker this way, leaving the chat's own messages untouched); it is dropped when the
        command ends.

        A LoadPair replaces the pair, so it also cancels what runs and what waits before it:
        those stop at their next safe point (within a round or a prefill chunk) instead of
        keeping the new pair waiting. A load that waits longer than `ANNOUNCE_AFTER` says so
        (`LoadQueued`, then `LoadStarted`). A load that has not begun when another is submitted
        is skipped."""
        with self._lock:
            request = next(self._ids)
            if sink is not None:  # before the command is queued: no reply can miss it
                self._sinks[request] = sink
            if isinstance(command, LoadPair):
                earlier = range(self._last_started + 1, request)
                if self._running is not None or earlier:
                    timer = threading.Timer(ANNOUNCE_AFTER, self._announce_wait, (request,))
                    timer.daemon = True
                    timer.start()
                if self._running is not None:
                    self._cancel.set()
                self._cancelled_early.update(earlier)
            self._queue.put((request, command))
        return request

    def _announce_wait(self, request: int) -> None:
        """Say that the load `request` waits, unless it has begun (on a timer's thread)."""
        with self._lock:
            if request <= self._last_started:
                return
            # a local load stops between two tensors; a split one cannot stop halfway: this waits
            running = self._running_command
            stopping = not (
                isinstance(running, LoadPair) and (running.ranks is not None or running.hostfile is not None)
            )
            self._queued_loads.add(request)
            self._send(WorkerMessage(request, LoadQueued(stopping)))

    def cancel(self, request: int | None = None) -> None:
        """Stop a command at its next safe point (between rounds or chunks): `request`, or
        whatever runs when None. A request cancelled before it started starts cancelled and
        ends at its first safe point with its usual cancelled result, so a Stop pressed while
        the worker is still busy with the command before it takes effect at once."""
        with self._lock:
            if request is None or request == self._running:
                self._cancel.set()
            elif request > self._last_started:
                self._cancelled_early.add(request)

    def _send(self, message: WorkerMessage) -> None:
        """To the request's sink where it has one, else to `emit`."""
        sink = self._sinks.get(message.request)
        (self._emit if sink is None else sink)(message)

    def shutdown(self, timeout: float = 10.0) -> bool:
        self._cancel.set()
        self._queue.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        wait_until_gone(self._thread)  # its MLX thread-locals must go while the interpreter lives
        return True

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def idle(self) -> bool:
        """No command runs and none waits: what a Stop must lead to quickly."""
        with self._lock:
            return self._running is None and self._queue.empty()

    @property
    def policies(self) -> PairPolicies:
        """The loaded pair's draft policies; `restored` names the modes that began from memory."""
        return self._policies

    def _run(self) -> None:
        stream = mx.new_stream(mx.default_device())
        with mx.stream(stream):
            self._serve()

    def _serve(self) -> None:
        """Handle commands in order until shutdown; a failure is reported, never raised."""
        while True:
            item = self._queue.get()
            if item is None:
                close_renderers()  # the pair goes with the worker, and its template's child too
                self._close_sharded()
                return
            request, command = item
            with self._lock:
                self._running = self._last_started = request
                self._running_command = command
                if request in self._cancelled_early:
                    self._cancelled_early.discard(request)
                    self._cancel.set()
                else:
                    self._cancel.clear()
                queued = request in self._queued_loads
                self._queued_loads.discard(request)
            try:
                if isinstance(command, LoadPair) and self._cancel.is_set():
                    # replaced (or cancelled) before it began: the pair loaded now stays
                    self._send(WorkerMessage(request, EngineError(_NOT_LOADED, kind=ErrorKind.STATE)))
                    continue
                if queued:
                    self._send(WorkerMessage(request, LoadStarted()))
                self._handle(request, command)
            except Exception as exc:
                detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                self._send(WorkerMessage(request, EngineError(detail, kind=ErrorKind.CRASH)))
            finally:
                with self._lock:
                    self._running = self._running_command = None
                    self._sinks.pop(request, None)

    def _pair_policies(self) -> PairPolicies:
        """Adaptive controllers live as long as the loaded pair (costs are the machine's), and
        start from what the last session learnt about it on this device."""
        return remembered(self._memory, *self._loaded)  # keyed by MLX's default device

    def _preemptible(self) -> Preemptible:
        """The cancel flag of background work: also set while another command waits."""
        return Preemptible(self._cancel, lambda: not self._queue.empty())

    def _warm_up(self, reply: Callable[[Reply], None], pair: ModelPair) -> None:
        """Compile the controller's pass shapes (see warmup.py). Work queued behind it (another
        load, a question) stops it: the pair is usable without it, only its first answer's
        prices are then less sure. A failure is a notice; the pair stays loaded."""

        def emit(done: int, total: int) -> None:
            reply(WarmUpProgress(done, total))

        emit(0, warm_up_steps(pair, MAX_K))
        stop = self._preemptible()
        try:
            compile_pass_shapes(pair, filler_ids(pair.tokenizer, 16), MAX_K, cancel=stop, progress=emit)
        except Exception as exc:
            reply(EngineError(f"warming up the pair failed: {exc}", kind=ErrorKind.NOTICE))

    def _reply(self, request: int) -> Callable[[Reply], None]:
        return lambda event: self._send(WorkerMessage(request, event))

    def _handle(self, request: int, command: Command) -> None:
        """The one dispatch: every command of the protocol, and nothing else."""
        reply = self._reply(request)
        match command:
            case LoadPair():
                self._load(reply, command)
            case ResetSession():
                if self._session is not None:
                    self._session.reset()
                if self._sharded is not None:
                    self._sharded.reset()
            case CheckLossless():
                reply(
                    check_answer(
                        self._pair, command.messages, command.answer, command.prompt_tokens, self._cancel
                    )
                )
            case RunArena():
                run_arena_job(
                    self._pair,
                    command.main,
                    command.candidates,
                    command.prompts,
                    k=command.k,
                    max_tokens=command.max_tokens,
                    save=command.save,
                    cancel=self._cancel,
                    emit=reply,
                    memory=self._memory,
                )
            case MeasureBaseline():  # background work: yields to any queued command
                if self._pair is None:
                    reply(EngineError("no model is loaded", kind=ErrorKind.STATE))
                    return
                stop = self._preemptible()
                reply(measure_plain(self._pair.main, command.context_tokens, command.tokens, stop))
            case Generate():
                self._generate(reply, command)

    def _close_sharded(self) -> None:
        if self._sharded is not None:
            self._sharded.close()
            self._sharded = None

    def _load(self, reply: Callable[[Reply], None], command: LoadPair) -> None:
        self._pair = self._session = None
        self._policies = PairPolicies()
        release_memory()  # the pair loaded before: its memory back before the next one takes more
        self._close_sharded()
        close_renderers()  # the unloaded pair's template child; the next pair starts its own
        if command.ranks is not None or command.hostfile is not None:
            try:  # the checks a pair loaded here meets, and the split's own, before any rank starts
                check_split(
                    command.main,
                    command.draft,
                    ranks=command.ranks,
                    hostfile=command.hostfile,
                    store=self._memory,
                )
            except SplitRefused as exc:
                reply(EngineError(str(exc), kind=ErrorKind.LOAD, plain=exc.plain))
                return
            except (ValueError, OSError) as exc:  # a machine list that cannot be used
                reply(EngineError(str(exc), kind=ErrorKind.LOAD))
                return
            try:
                self._sharded = ShardedPair(
                    command.main, command.draft, Placement(command.ranks, command.hostfile)
                )
            except (RanksLost, ValueError, OSError) as exc:
                reply(EngineError(str(exc), kind=ErrorKind.LOAD))
                return
            self._loaded = (command.main, command.draft)
            # a split's costs are not this machine's alone: its controller is kept apart
            where = f"split over {command.ranks} ranks" if command.ranks else f"split by {command.hostfile}"
            self._policies = remembered(self._memory, *self._loaded, where)
            reply(
                PairLoaded(
                    command.main,
                    command.draft,
                    self._sharded.speculation_refusal,
                    machines=len(self._sharded.ranks) or None,
                )
            )
            return
        error: EngineError | None
        try:
            pair = load_checked_pair(command.main, command.draft, store=self._memory, cancel=self._cancel)
        except ModelLoadError as exc:
            error = EngineError(str(exc), kind=ErrorKind.LOAD, plain=exc.plain)
        else:
            error = None
        if error is not None:  # out of the handler: its traceback no longer holds what was read
            release_memory()
            reply(error)
            return
        self._pair, self._session = pair, ChatSession(pair)
        self._loaded = (command.main, command.draft)
        self._policies = self._pair_policies()
        refusal = self._session.speculation_refusal
        if (
            pair.draft is not None
            and refusal is None
            and (compiles_per_shape() if command.warm_up is None else command.warm_up)
        ):
            self._warm_up(reply, pair)
        device = Device.GPU if on_gpu() else Device.CPU
        reply(PairLoaded(command.main, command.draft, refusal, device))

    def _generate(self, reply: Callable[[Reply], None], command: Generate) -> None:
        sharded = self._sharded
        if sharded is None and (self._session is None or self._pair is None):
            reply(EngineError("no model is loaded", kind=ErrorKind.STATE))
            return
        encode: Callable[[list[Mapping[str, Any]]], list[int]]
        if sharded is not None:  # rendered on rank 0, which holds the tokenizer
            if command.prompt is not None:
                reply(EngineError("a split main answers chats only, not raw prompts", kind=ErrorKind.STATE))
                return
            encode, limit = sharded.render, sharded.context_length
        else:
            assert self._pair is not None
            tokenizer = self._pair.tokenizer
            limit = context_length(self._pair.main.config)

            def encode(messages: list[Mapping[str, Any]]) -> list[int]:
                return format_chat(tokenizer, [dict(m) for m in messages])

            if command.prompt is not None:  # a raw prompt: the tokenizer's ids, no chat template
                raw = command.prompt

                def encode(messages: list[Mapping[str, Any]]) -> list[int]:
                    return list(tokenizer.encode(raw))

        try:
            # the gate comes before prefill: a conversation past the main's context is refused
            # (or shortened) in the time it takes to tokenize it, not after minutes of prefill
            no_template = command.prompt is not None
            fitted = fit_conversation(
                command.messages,
                encode,
                limit,
                command.max_tokens,
                drop_oldest=command.overflow is ContextOverflow.DROP_OLDEST and not no_template,
                advice=PROMPT_ADVICE if no_template else CHAT_ADVICE,
            )
        except RanksLost as exc:
            self._sharded = None
            reply(EngineError(str(exc), kind=ErrorKind.RANKS_LOST))
            return
        except TemplateError as exc:
            reply(EngineError(str(exc), kind=ErrorKind.TEMPLATE))
            return
        except ContextTooLong as exc:
            reply(EngineError(str(exc), kind=ErrorKind.CONTEXT))
            return
        if fitted.dropped:
            reply(EngineError(fitted.note, kind=ErrorKind.NOTICE))
        prompt = fitted.ids
        if sharded is not None:
            self._generate_sharded(reply, sharded, command, prompt, fitted.max_tokens)
            return
        assert self._pair is not None and self._session is not None
        reply(GenerationContext(self._pair.main.source, len(prompt)))
        speculation = command.speculation
        policy = self._policies.policy(speculation.mode, speculation.k)
        events = generate(
            self._session,
            prompt,
            sampling=command.sampling,
            policy=policy,
            max_tokens=fitted.max_tokens,
            cancel=self._cancel,
            acceptance=command.speculation.acceptance,
        )
        for event in events:
            if isinstance(event, RoundEvent):
                event = _forwarded(event, tokenizer)
            reply(event)
        self._policies.answered(speculation.mode)

    def _generate_sharded(
        self,
        reply: Callable[[Reply], None],
        sharded: ShardedPair,
        command: Generate,
        prompt: list[int],
        room: int,
    ) -> None:
        """The answer from rank 0 (which decodes refused drafts itself); a lost rank unloads."""
        reply(GenerationContext(self._loaded[0], len(prompt)))
        speculation = command.speculation
        mode = speculation.mode
        spec = PolicySpec(mode.value, speculation.k)
        for event in sharded.generate(
            prompt,
            spec,
            command.sampling,
            room,
            self._cancel,
            acceptance=speculation.acceptance,
            saved_state=None if sharded.has_controller(mode.value) else self._policies.saved(mode),
        ):
            reply(event)
        learnt = sharded.learnt.pop(mode.value, None)
        if learnt is not None:  # rank 0's controller, kept as a local one is after each answer
            self._policies.keep(mode, learnt)
        if sharded.lost is not None:
            self._sharded = None


def _forwarded(event: RoundEvent, tokenizer: Any) -> RoundEvent:
    """The round as the UI gets it: its refused drafts decoded."""
    if event.accepted < len(event.proposed):
        event = dataclasses.replace(event, refused_text=_refused_text(tokenizer, event))
    return event


def _refused_text(tokenizer: Any, event: RoundEvent) -> str:
    """The refused drafts as text, decoded here rather than in the timed loop. It is only shown,
    so a draft id the main's tokenizer cannot decode leaves it empty instead of failing the answer."""
    try:
        return str(tokenizer.decode(list(event.proposed[event.accepted :])))
    except Exception:
        return ""


def remembering_worker(emit: Callable[[WorkerMessage], None]) -> EngineWorker:
    """The app's worker: its adaptive controllers keep what they learnt in the library store."""
    return EngineWorker(emit, memory=Store())
