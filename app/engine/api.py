"""SpecChat's engine as a library: load a pair, check it, stream an answer, read its stats.

In the spirit of mlx-lm's `stream_generate`, but every token says who chose it (the main, the
draft or prompt lookup) and which drafted tokens the main refused in its place. It is a thin
layer over the decode loop and the policies the app itself runs, so what it streams is what
the app would show. Use a pair from the thread that loaded it: MLX streams belong to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from threading import Event
from typing import Literal

from app.engine.decoding.context import ContextTooLong, answer_room, context_length
from app.engine.decoding.decode import generate
from app.engine.decoding.events import (
    EngineError,
    GenerationFinished,
    GenerationStats,
    Provenance,
    RoundEvent,
    TokenEvent,
)
from app.engine.decoding.loading import ModelLoadError, ModelPair
from app.engine.decoding.policy import DraftPolicy
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.session import ChatSession
from app.engine.decoding.templates.chat import TemplateError, format_chat
from app.engine.features.baselines import filler_ids
from app.engine.library.compat import REFUSE, Reason, Verdict, check_pair
from app.engine.library.discovery import resolve_model
from app.engine.library.pairing import IncompatiblePair, load_checked_pair
from app.engine.library.store import Store
from app.engine.policy.modes import Memory, PairPolicies, SpeculationMode, remembered
from app.engine.policy.warmup import compile_pass_shapes, compiles_per_shape

__all__ = [
    "Answer",
    "AnswerStream",
    "Compatibility",
    "ContextTooLong",
    "GenerationStats",
    "IncompatiblePair",
    "LoadedPair",
    "Mode",
    "ModelLoadError",
    "Notice",
    "Provenance",
    "Reason",
    "SamplingParams",
    "TemplateError",
    "Token",
    "check_compatibility",
    "load_pair",
    "stream_generate",
]

# "plain" is the older word for "off", still accepted (`SpeculationMode.parse`)
Mode = Literal["adaptive", "lookup", "fixed", "off", "plain"]
MODES: tuple[Mode, ...] = ("adaptive", "lookup", "fixed", "off", "plain")


@dataclass(frozen=True, slots=True)
class Compatibility:
    """Whether `draft` may speculate for `main`, and why: the library's rules, as the app's
    model picker applies them. `reason` is one line a user can act on."""

    main: Path
    draft: Path
    compatible: bool
    reason: str
    reasons: tuple[Reason, ...]  # every finding, refusals and warnings, with its evidence
    verdict: Verdict  # the library's record of it (what `to_json` writes)

    @property
    def warnings(self) -> tuple[Reason, ...]:
        return tuple(r for r in self.reasons if r.severity != REFUSE)

    def to_json(self) -> dict[str, object]:
        return self.verdict.to_json()


def check_compatibility(main: str | Path, draft: str | Path, *, store: Store | None = None) -> Compatibility:
    """Check a pair from its tokenizer and config files, without loading any weights.

    Each model is a folder or the repo id of a model already downloaded. Raises
    FileNotFoundError when one is not there, ValueError when a name is not a valid repo id.
    Verdicts are cached in the library's store, keyed by both folders' fingerprints."""
    main_dir, draft_dir = resolve_model(str(main)), resolve_model(str(draft))
    verdict = check_pair(main_dir, draft_dir, store)
    return Compatibility(
        main=main_dir,
        draft=draft_dir,
        compatible=verdict.compatible,
        reason=verdict.summary(),
        reasons=verdict.reasons,
        verdict=verdict,
    )


@dataclass(frozen=True, slots=True)
class Token:
    """One token of an answer as a reader sees it.

    `refused_ids` are the drafted tokens the main turned down at this token's place (this token
    is the main's own choice there); `refused_text` is them decoded. `text` may be empty when
    the token ends mid-character: the next token's text carries the whole character."""

    text: str
    id: int
    provenance: Provenance
    index: int  # position in the answer, from 0
    refused_ids: tuple[int, ...] = ()
    refused_text: str = ""


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the engine decided on the way, e.g. that this pair cannot speculate."""

    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class Answer:
    """A finished answer. `finish_reason` is stop, length or cancelled; `tail` is text the last
    token left unfinished (part of `text`, but in no Token), to print after the stream."""

    text: str
    token_ids: tuple[int, ...]
    finish_reason: str
    stats: GenerationStats
    tail: str
    notices: tuple[Notice, ...]


class LoadedPair:
    """A main model, an optional draft, and the conversation their caches hold.

    The caches are kept between answers, so an answer that extends the previous conversation
    reuses its prompt; adaptive controllers are kept too, since what they learnt (the pair's
    costs on this machine) still holds. With a `memory` (`load_pair` gives the app's store) they
    start from what the pair's last session learnt on this device and save to it after each answer,
    as the window does."""

    def __init__(self, models: ModelPair, memory: Memory | None = None) -> None:
        self.models = models
        self._session = ChatSession(models)
        self._policies = (
            PairPolicies() if memory is None else remembered(memory, models.main.source, self.draft_source)
        )
        self._streaming: AnswerStream | None = None

    @property
    def main_source(self) -> str:
        return self.models.main.source

    @property
    def draft_source(self) -> str | None:
        return self.models.draft.source if self.models.draft is not None else None

    @property
    def speculation_refusal(self) -> str | None:
        """Why this pair generates plainly whatever the mode (a cache that cannot be rewound), or None."""
        return self._session.speculation_refusal

    @property
    def can_speculate(self) -> bool:
        return self._session.can_speculate

    def reset(self) -> None:
        """Forget the conversation the caches hold (a new chat)."""
        self._finish_streaming()
        self._session.reset()

    def policy(self, mode: str, k: int) -> DraftPolicy:
        """The draft policy `stream` uses for `mode`; an adaptive one is kept, so what it learnt holds."""
        return self._policies.policy(SpeculationMode.parse(mode), k)

    def stream(
        self,
        prompt: str | Sequence[Mapping[str, str]],
        *,
        mode: Mode = "adaptive",
        k: int = 4,
        sampling: SamplingParams | None = None,
        max_tokens: int = 256,
        acceptance: str | None = None,
        policy: DraftPolicy | None = None,
    ) -> AnswerStream:
        """Start an answer to `prompt`: one user message, or the whole conversation as chat
        messages ({"role": ..., "content": ...}), rendered with the main's chat template.

        `mode`: adaptive (the app's default: the draft model or prompt lookup, each used only
        when it pays), lookup (prompt lookup alone), fixed (always `k` drafted tokens), off
        (no speculation; "plain" says the same). `policy` replaces the mode with a DraftPolicy of your own.
        `acceptance` is "exact" or "residual"; None: residual when sampling, exact when greedy.
        Greedy answers are the main model's own whatever the mode.

        Raises ValueError for a bad setting, ContextTooLong (a ValueError) for a prompt that
        leaves the main's context too little room for an answer, and TemplateError for a chat
        template that fails, here rather than mid-stream; nothing runs on the models until the
        stream is read. The answer never runs past the main's context: `max_tokens` is cut to it."""
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        chosen = policy if policy is not None else self.policy(mode, k)
        messages = (
            [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
        )
        ids = format_chat(self.models.tokenizer, messages)
        max_tokens = answer_room(len(ids), max_tokens, context_length(self.models.main.config))
        self._finish_streaming()
        cancel = Event()
        events = generate(
            self._session,
            ids,
            sampling=sampling,
            policy=chosen,
            max_tokens=max_tokens,
            cancel=cancel,
            acceptance=acceptance,
        )
        learnt = SpeculationMode.parse(mode) if policy is None else None  # a policy of yours is not saved
        self._streaming = AnswerStream(
            self.models, events, cancel, on_end=lambda stream: self._streamed(stream, learnt)
        )
        return self._streaming

    def _streamed(self, stream: AnswerStream, mode: SpeculationMode | None) -> None:
        if mode is not None:
            self._policies.answered(mode)
        if self._streaming is stream:
            self._streaming = None

    def _finish_streaming(self) -> None:
        """Stop an answer left half-read, so the caches hold a whole one before the next starts."""
        if self._streaming is not None:
            self._streaming.stop()
            self._streaming = None


def load_pair(
    main: str | Path,
    draft: str | Path | None = None,
    *,
    force: bool = False,
    warm_up: bool | None = None,
    remember: bool = True,
) -> LoadedPair:
    """Load a main model and, optionally, a draft: local MLX folders or hub repo ids.

    Raises ModelLoadError, with a message a user can act on, when either cannot be loaded or
    the draft may not speculate for the main (`check_compatibility`'s first reason; an
    IncompatiblePair carries the verdict). `force` loads such a draft anyway, for experiments.
    `warm_up`: compile every pass shape the adaptive controller may play before the first
    answer, as the app does after loading a pair; None: where the device builds kernels per
    shape (a GPU), where a shape's first pass would otherwise cost several times the next.
    `remember`: the adaptive controller starts from, and saves to, what the app learnt about
    this pair on this device (False: it starts from nothing and keeps nothing)."""
    pair = LoadedPair(load_checked_pair(main, draft, force=force), Store() if remember else None)
    models = pair.models
    if (
        models.draft is not None
        and pair.can_speculate
        and (compiles_per_shape() if warm_up is None else warm_up)
    ):
        compile_pass_shapes(models, filler_ids(models.tokenizer, 16))
    return pair


class AnswerStream:
    """An answer being generated: iterate it for Tokens, then read `answer` (or `stats`).

    Tokens come a round at a time: a round's refused drafts are known only when it is judged.
    To end early, call `stop()` (or `cancel()` from another thread, then read on): the answer
    then ends with finish reason "cancelled" at the next round."""

    def __init__(
        self,
        models: ModelPair,
        events: Iterator[object],
        cancel: Event,
        on_end: Callable[[AnswerStream], None],
    ) -> None:
        self._models = models
        self._cancel = cancel
        self._on_end = on_end
        self._notices: list[Notice] = []
        self._answer: Answer | None = None
        self._tokens = self._read(events)

    def __iter__(self) -> AnswerStream:
        return self

    def __next__(self) -> Token:
        return next(self._tokens)

    @property
    def notices(self) -> tuple[Notice, ...]:
        """Notices so far; every one arrives before the token it concerns."""
        return tuple(self._notices)

    @property
    def answer(self) -> Answer:
        if self._answer is None:
            raise RuntimeError("the answer is still streaming: read every token first")
        return self._answer

    @property
    def stats(self) -> GenerationStats:
        return self.answer.stats

    def cancel(self) -> None:
        """Ask the answer to end at the next round; safe from any thread. Read on to its end."""
        self._cancel.set()

    def stop(self) -> None:
        """End the answer now, keeping the tokens so far (and the caches whole): the rest of the
        round in progress is read and dropped. Call it from the thread that reads the stream."""
        self._cancel.set()
        for _ in self._tokens:
            pass

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self._models.tokenizer.decode(list(ids)))

    def _read(self, events: Iterator[object]) -> Iterator[Token]:
        """The loop's events as Tokens, each round's held until its verdict names the refusals."""
        held: list[TokenEvent] = []
        for event in events:
            if isinstance(event, TokenEvent):
                held.append(event)
            elif isinstance(event, RoundEvent):
                stopped = event.decision.draft_stopped
                if stopped is not None and Notice("notice", stopped) not in self._notices:
                    self._notices.append(Notice("notice", stopped))
                refused = event.proposed[event.accepted :]
                for place, token in enumerate(held):
                    # the token after the accepted drafts is the main's own choice in their place
                    mine = refused if place == event.accepted else ()
                    yield Token(
                        token.text,
                        token.id,
                        token.provenance,
                        token.index,
                        mine,
                        self._decode(mine) if mine else "",
                    )
                held = []
            elif isinstance(event, EngineError):
                self._notices.append(Notice(event.kind, event.message))
            elif isinstance(event, GenerationFinished):
                self._answer = Answer(
                    text=event.text,
                    token_ids=event.token_ids,
                    finish_reason=event.reason,
                    stats=event.stats,
                    tail=event.tail,
                    notices=tuple(self._notices),
                )
        self._on_end(self)


def stream_generate(
    pair: LoadedPair,
    prompt: str | Sequence[Mapping[str, str]],
    *,
    mode: Mode = "adaptive",
    k: int = 4,
    sampling: SamplingParams | None = None,
    max_tokens: int = 256,
    acceptance: str | None = None,
    policy: DraftPolicy | None = None,
) -> AnswerStream:
    """Start an answer to `prompt` with `pair`: see `LoadedPair.stream`."""
    return pair.stream(
        prompt,
        mode=mode,
        k=k,
        sampling=sampling,
        max_tokens=max_tokens,
        acceptance=acceptance,
        policy=policy,
    )
