"""The engine's one worker thread: it owns every MLX object (models, caches, streams).

MLX streams belong to the thread that created them, so loading and generating both happen here.
Callers submit command dataclasses and receive `WorkerMessage`s through a callback that the
worker calls on its own thread; the UI forwards them to the GUI thread. Nothing here blocks
the caller except `shutdown`.
"""

from __future__ import annotations

import itertools
import queue
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import mlx.core as mx

from app.engine.decoding.decode import generate
from app.engine.decoding.events import EngineError, Event, WarmUpProgress
from app.engine.decoding.loading import ModelLoadError, ModelPair, load_pair
from app.engine.decoding.policy import DraftPolicy, FixedDraftLength, PlainDecoding
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.session import ChatSession
from app.engine.decoding.templates import TemplateError, format_chat
from app.engine.features.baselines import (
    BaselineMeasured,
    GenerationContext,
    MeasureBaseline,
    Preemptible,
    filler_ids,
    measure_plain,
)
from app.engine.jobs import CheckLossless, JobEvent, RunArena, run_arena_job, run_check
from app.engine.library.store import Store
from app.engine.policy.adaptive import MAX_K, AdaptiveDraftLength
from app.engine.policy.controller_state import export_state, restore_state, state_key
from app.engine.policy.warmup import compile_pass_shapes, compiles_per_shape


@dataclass(frozen=True, slots=True)
class LoadPair:
    """`warm_up`: compile every pass shape the adaptive controller may play before the pair is
    reported loaded (WarmUpProgress on the way); None: where the device builds kernels per
    shape (a GPU)."""

    main: str
    draft: str | None = None
    warm_up: bool | None = None


@dataclass(frozen=True, slots=True)
class SpeculationSettings:
    """adaptive: k chosen each round (draft model or prompt lookup, bypassed when it does not
    pay); lookup: adaptive over prompt lookup alone; fixed: always k drafted tokens; off: plain.

    `acceptance` is "exact" or "residual"; None: residual when sampling, exact when greedy.
    """

    mode: str = "adaptive"
    k: int = 4
    acceptance: str | None = None

    def policy(self) -> DraftPolicy:
        if self.mode == "off":
            return PlainDecoding()
        if self.mode == "fixed":
            return FixedDraftLength(self.k)
        if self.mode == "adaptive":
            return AdaptiveDraftLength()
        if self.mode == "lookup":
            return AdaptiveDraftLength(use_draft=False)
        raise ValueError(f"unknown speculation mode {self.mode!r}")


@dataclass(frozen=True, slots=True)
class Generate:
    messages: tuple[dict[str, str], ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    speculation: SpeculationSettings = field(default_factory=SpeculationSettings)
    max_tokens: int = 512


@dataclass(frozen=True, slots=True)
class ResetSession:
    """Forget the conversation held in the caches (a new chat)."""


@dataclass(frozen=True, slots=True)
class PairLoaded:
    main: str
    draft: str | None
    speculation_refusal: str | None


Command = LoadPair | Generate | ResetSession | CheckLossless | RunArena | MeasureBaseline


@dataclass(frozen=True, slots=True)
class WorkerMessage:
    request: int
    event: Event | PairLoaded | JobEvent | GenerationContext | BaselineMeasured


_STOP = object()


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
        self._queue: queue.Queue[tuple[int, Command] | object] = queue.Queue()
        self._ids = itertools.count(1)
        self._cancel = threading.Event()
        # which request runs, and those cancelled before they started (the GUI thread cancels,
        # this one starts commands: the lock orders the two)
        self._lock = threading.Lock()
        self._running: int | None = None
        self._last_started = 0
        self._cancelled_early: set[int] = set()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._pair: ModelPair | None = None
        self._session: ChatSession | None = None
        self._policies: dict[str, DraftPolicy] = {}

    def start(self) -> None:
        self._thread.start()

    def submit(self, command: Command) -> int:
        request = next(self._ids)
        self._queue.put((request, command))
        return request

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

    def shutdown(self, timeout: float = 10.0) -> bool:
        self._cancel.set()
        self._queue.put(_STOP)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        stream = mx.new_stream(mx.default_device())
        with mx.stream(stream):
            self._serve()

    def _serve(self) -> None:
        """Handle commands in order until shutdown; a failure is reported, never raised."""
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            request, command = item  # type: ignore[misc]
            with self._lock:
                self._running = self._last_started = request
                if request in self._cancelled_early:
                    self._cancelled_early.discard(request)
                    self._cancel.set()
                else:
                    self._cancel.clear()
            try:
                self._handle(request, command)
            except Exception as exc:
                detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                self._emit(WorkerMessage(request, EngineError(detail, kind="crash")))
            finally:
                with self._lock:
                    self._running = None

    def _policy_for(self, speculation: SpeculationSettings) -> DraftPolicy:
        """Adaptive controllers live as long as the loaded pair (costs are the machine's), and
        start from what the last session learnt about it."""
        if speculation.mode not in ("adaptive", "lookup"):
            return speculation.policy()
        policy = self._policies.get(speculation.mode)
        if policy is None:
            policy = self._policies[speculation.mode] = speculation.policy()
            if self._memory is not None and isinstance(policy, AdaptiveDraftLength):
                restore_state(policy, self._memory.get("controller", self._memory_key(speculation.mode)))
        return policy

    def _memory_key(self, mode: str) -> str:
        return state_key(*self._loaded, str(mx.default_device()), mode)

    def _remember(self, speculation: SpeculationSettings) -> None:
        policy = self._policies.get(speculation.mode)
        if self._memory is not None and isinstance(policy, AdaptiveDraftLength):
            self._memory.put("controller", self._memory_key(speculation.mode), export_state(policy))

    def _preemptible(self) -> Preemptible:
        """The cancel flag of background work: also set while another command waits."""
        return Preemptible(self._cancel, lambda: not self._queue.empty())

    def _warm_up(self, request: int, pair: ModelPair) -> None:
        """Compile the controller's pass shapes (see warmup.py). Work queued behind it (another
        load, a question) stops it: the pair is usable without it, only its first answer's
        prices are then less sure. A failure is a notice; the pair stays loaded."""
        emit = lambda done, total: self._emit(WorkerMessage(request, WarmUpProgress(done, total)))
        emit(0, MAX_K)
        stop = self._preemptible()
        try:
            compile_pass_shapes(pair, filler_ids(pair.tokenizer, 16), MAX_K, cancel=stop, progress=emit)
        except Exception as exc:
            self._emit(
                WorkerMessage(request, EngineError(f"warming up the pair failed: {exc}", kind="notice"))
            )

    def _handle(self, request: int, command: Command) -> None:
        if isinstance(command, LoadPair):
            self._pair = self._session = None
            self._policies = {}
            try:
                pair = load_pair(command.main, command.draft)
            except ModelLoadError as exc:
                self._emit(WorkerMessage(request, EngineError(str(exc), kind="load")))
                return
            self._pair, self._session = pair, ChatSession(pair)
            self._loaded = (command.main, command.draft)
            refusal = self._session.speculation_refusal
            if (
                pair.draft is not None
                and refusal is None
                and (compiles_per_shape() if command.warm_up is None else command.warm_up)
            ):
                self._warm_up(request, pair)
            self._emit(WorkerMessage(request, PairLoaded(command.main, command.draft, refusal)))
        elif isinstance(command, ResetSession):
            if self._session is not None:
                self._session.reset()
        elif isinstance(command, CheckLossless):
            self._emit(WorkerMessage(request, run_check(self._pair, command, self._cancel)))
        elif isinstance(command, RunArena):
            run_arena_job(self._pair, command, self._cancel, lambda e: self._emit(WorkerMessage(request, e)))
        elif isinstance(command, MeasureBaseline):  # background work: yields to any queued command
            if self._pair is None:
                self._emit(WorkerMessage(request, EngineError("no model is loaded", kind="state")))
                return
            stop = self._preemptible()
            self._emit(
                WorkerMessage(
                    request, measure_plain(self._pair.main, command.context_tokens, command.tokens, stop)
                )
            )
        elif isinstance(command, Generate):
            if self._session is None or self._pair is None:
                self._emit(WorkerMessage(request, EngineError("no model is loaded", kind="state")))
                return
            try:
                prompt = format_chat(self._pair.tokenizer, list(command.messages))
            except TemplateError as exc:
                self._emit(WorkerMessage(request, EngineError(str(exc), kind="template")))
                return
            self._emit(WorkerMessage(request, GenerationContext(self._pair.main.source, len(prompt))))
            events = generate(
                self._session,
                prompt,
                sampling=command.sampling,
                policy=self._policy_for(command.speculation),
                max_tokens=command.max_tokens,
                cancel=self._cancel,
                acceptance=command.speculation.acceptance,
            )
            for event in events:
                self._emit(WorkerMessage(request, event))
            self._remember(command.speculation)


def remembering_worker(emit: Callable[[WorkerMessage], None]) -> EngineWorker:
    """The app's worker: its adaptive controllers keep what they learnt in the library store."""
    return EngineWorker(emit, memory=Store())
