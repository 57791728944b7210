"""A synthetic engine with the worker's interface: scripted tokens at a chosen rate, no MLX.

Used by the screenshots, the UI benchmark and the widget tests, so they exercise the real bridge
and window with a predictable stream (draft, lookup and main tokens, refused drafts, bypass).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Protocol

from app.engine.decoding.events import Decision, Reason
from app.engine.features.baselines import Preemptible, context_bucket
from app.engine.protocol import (
    BaselineMeasured,
    CheckLossless,
    Command,
    Device,
    EngineError,
    ErrorKind,
    FinishReason,
    Generate,
    GenerationContext,
    GenerationFinished,
    GenerationStats,
    LoadPair,
    MeasureBaseline,
    PairLoaded,
    PrefillProgress,
    Provenance,
    Reply,
    ResetSession,
    RoundEvent,
    RunArena,
    SpeculationMode,
    TokenEvent,
    WarmUpProgress,
    WorkerMessage,
)
from app.engine.worker import EngineWorker

SAMPLE = """Speculative decoding lets a **small draft model** guess the next few tokens, and the
*main model* checks them all in one pass.

1. The draft proposes `k` tokens.
2. The main keeps the longest prefix it agrees with.

```python
def accept(draft, main):
    n = 0
    while n < len(draft) and draft[n] == main[n]:
        n += 1
    return draft[:n] + [main[n]]
```

When the draft is right, you get several tokens for the price of one verification.
"""

VOCAB = re.findall(r"\s*\S+|\s+", SAMPLE)


def fake_decode(ids: list[int]) -> str:
    return "".join(VOCAB[i % len(VOCAB)] for i in ids)


class Clock(Protocol):
    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class WallClock:
    """Real time: what the screenshots and the UI benchmark run on."""

    def now(self) -> float:
        return time.perf_counter()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class ExactClock:
    """Time that advances by exactly what the engine sleeps. The engine still sleeps for real, so
    the stream keeps its pace, but the token times it reports (and the rates the UI computes from
    them) come out as configured however loaded the machine is; tests assert on those."""

    def __init__(self) -> None:
        self._now = 0.0

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._now += seconds  # only the engine's thread sleeps on its clock
            time.sleep(seconds)


class FakeEngine(EngineWorker):
    """The worker's queue, thread and cancel, with scripted answers instead of models.

    `rate`: tokens per second; `script`: the answer's pieces; `clock`: where its times come from;
    `refuse`: the error a command gets instead of its answer (None: answered), for tests of failures.
    """

    def __init__(
        self,
        emit: Callable[[WorkerMessage], None],
        rate: float = 400.0,
        script: list[str] | None = None,
        k: int = 4,
        load_seconds: float = 0.0,
        prefill_seconds: float = 0.0,
        plain_rate: float | None = None,
        clock: Clock | None = None,
        prefill_chunks: int = 1,
        prompt_tokens: int | None = None,
        warm_up_shapes: int = 0,
        warm_up_seconds: float = 0.0,
        device: Device | None = None,
        lose_ranks_after: int | None = None,
        refuse: Callable[[Command], EngineError | None] | None = None,
    ) -> None:
        super().__init__(emit, name="specchat-fake-engine")
        self.plain_rate = plain_rate or rate / 1.8  # what a baseline measurement finds
        self.rate, self.k, self.load_seconds = rate, k, load_seconds
        self.prefill_seconds = prefill_seconds
        # a slow prompt read in chunks, each reported and each a point where a Stop is taken
        self.prefill_chunks, self.prompt_tokens = prefill_chunks, prompt_tokens
        self.warm_up_shapes, self.warm_up_seconds = warm_up_shapes, warm_up_seconds
        self.device = device  # what PairLoaded says the pair runs on (None: nothing said)
        # a pair loaded across machines loses one after this many tokens of an answer
        self.lose_ranks_after = lose_ranks_after
        self.split = False
        self.clock = clock or WallClock()
        self.script = script or VOCAB
        self.refuse = refuse
        self.commands: list[Command] = []
        self.loaded: str | None = None

    def _run(self) -> None:
        self._serve()  # no MLX stream: nothing here touches MLX

    def _handle(self, request: int, command: Command) -> None:
        self.commands.append(command)
        refused = self.refuse(command) if self.refuse is not None else None
        if refused is not None:
            self._send(WorkerMessage(request, refused))
            return
        match command:
            case LoadPair():
                if not self._read_weights(request, command):
                    return
                self.loaded = command.main
                self.split = command.hostfile is not None
                self._warm_up_shapes(request)
                machines = 2 if self.split else None
                loaded = PairLoaded(command.main, command.draft, None, self.device, machines)
                self._send(WorkerMessage(request, loaded))
            case Generate():
                self._scripted_answer(request, command)
            case MeasureBaseline():
                self._measure(request, command)
            case CheckLossless() | RunArena():
                self._send(
                    WorkerMessage(
                        request,
                        EngineError("the synthetic engine has no models to measure", kind=ErrorKind.STATE),
                    )
                )
            case ResetSession():
                pass  # no caches to forget

    def _read_weights(self, request: int, command: LoadPair) -> bool:
        """`load_seconds` of reading, stopped by a cancel as the real worker's load is (a split
        main's excepted); False, with the worker's error, when it was."""
        split = command.ranks is not None or command.hostfile is not None
        end = self.clock.now() + self.load_seconds
        while self.clock.now() < end:
            if self._cancel.is_set() and not split:
                error = EngineError(f"loading {command.main} was cancelled", kind=ErrorKind.LOAD)
                self._send(WorkerMessage(request, error))
                return False
            self.clock.sleep(min(0.05, end - self.clock.now()))
        return True

    def _warm_up_shapes(self, request: int) -> None:
        """A GPU's warm-up after a load: shapes compiled one by one, stopped by a cancel."""
        for done in range(self.warm_up_shapes + 1):
            if self._cancel.is_set():
                return
            self._send(WorkerMessage(request, WarmUpProgress(done, self.warm_up_shapes)))
            if done < self.warm_up_shapes:
                self.clock.sleep(self.warm_up_seconds / self.warm_up_shapes)

    def _measure(self, request: int, command: MeasureBaseline) -> None:
        """Plain tokens at `plain_rate`, giving way to queued work as the real worker does."""
        stop = Preemptible(self._cancel, lambda: not self._queue.empty())
        start = self.clock.now()
        times: list[float] = []
        while len(times) < command.tokens and not stop.is_set():
            times.append(self.clock.now() - start)
            self.clock.sleep(1 / self.plain_rate)
        done = len(times) == command.tokens and len(times) > 1
        rate = (len(times) - 1) / (times[-1] - times[0]) if done else None
        self._send(
            WorkerMessage(
                request,
                BaselineMeasured(
                    self.loaded or "",
                    command.context_tokens,
                    context_bucket(command.context_tokens),
                    rate,
                    len(times),
                    self.clock.now() - start,
                    not done,
                ),
            )
        )

    def _scripted_answer(self, request: int, command: Generate) -> None:
        def emit(event: Reply) -> None:
            self._send(WorkerMessage(request, event))

        start = self.clock.now()
        prompt = self.prompt_tokens or sum(len(m["content"]) for m in command.messages) // 4 + 8
        emit(GenerationContext(self.loaded or "", prompt))
        if self.prefill_chunks > 1:
            emit(PrefillProgress(0, prompt, 0.0))
        for chunk in range(1, self.prefill_chunks + 1):
            if self._cancel.is_set():
                break
            self.clock.sleep(self.prefill_seconds / self.prefill_chunks)
            emit(PrefillProgress(prompt * chunk // self.prefill_chunks, prompt, self.clock.now() - start))
        prefill = self.clock.now() - start
        n = rnd = proposed_total = accepted_total = 0
        ids: list[int] = []
        reason = FinishReason.LENGTH
        while n < command.max_tokens:
            if self._cancel.is_set():
                reason = FinishReason.CANCELLED
                break
            if self.split and self.lose_ranks_after is not None and n >= self.lose_ranks_after:
                emit(
                    EngineError(
                        "lost a rank: rank 1 (mac2.local) stopped answering", kind=ErrorKind.RANKS_LOST
                    )
                )
                self.split = False
                return
            bypass = command.speculation.mode == SpeculationMode.OFF or (rnd // 12) % 4 == 3
            k = 0 if bypass else self.k
            source = Provenance.LOOKUP if rnd % 5 == 4 else Provenance.DRAFT
            accepted = 0 if k == 0 else (rnd * 7 + 3) % (k + 1)
            emitted = min(accepted + 1, command.max_tokens - n)
            now = self.clock.now() - start
            proposed = (
                tuple(n + j for j in range(k))
                if accepted == k
                else tuple(
                    [n + j for j in range(accepted)] + [(n * 31 + j) % len(VOCAB) for j in range(accepted, k)]
                )
            )
            for j in range(emitted):
                token = n % len(self.script)
                ids.append(token)
                emit(
                    TokenEvent(
                        token, self.script[token], source if j < accepted else Provenance.MAIN, now, rnd, n
                    )
                )
                n += 1
            decision = Decision(Reason.BYPASS, 0) if bypass else Decision(Reason.BEST, k, source, 1.8)
            emit(
                RoundEvent(
                    rnd,
                    k,
                    proposed,
                    min(accepted, emitted),
                    tuple(ids[-emitted:]),
                    0.0,
                    emitted / self.rate,
                    source if k else Provenance.MAIN,
                    decision,
                    refused_text=fake_decode(list(proposed[min(accepted, emitted) :])),
                )
            )
            rnd += 1
            proposed_total += k
            accepted_total += min(accepted, emitted)
            delay = start + prefill + n / self.rate - self.clock.now()
            if delay > 0:
                self.clock.sleep(delay)
        decode = self.clock.now() - start - prefill
        stats = GenerationStats(prompt, 0, n, prefill, decode, rnd, proposed_total, accepted_total)
        text = "".join(self.script[i] for i in ids)
        emit(GenerationFinished(reason, text, tuple(ids), stats))
