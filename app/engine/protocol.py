"""The worker's protocol: every command it accepts and every message it sends back.

Callers (the UI, the smoke test, tools) import from here only. Everything crosses a thread, so
every type is a frozen dataclass. Commands and the worker's own results are defined here;
events produced below the worker (the decode loop's tokens and rounds, the features' reports)
are defined where they are made, since those layers cannot import this one, and re-exported
here so the protocol stays one import.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from app.engine.decoding.acceptance import AcceptanceRule
from app.engine.decoding.events import (
    EngineError,
    ErrorKind,
    Event,
    FinishReason,
    GenerationFinished,
    GenerationStats,
    PrefillProgress,
    Provenance,
    RoundEvent,
    TokenEvent,
    WarmUpProgress,
)
from app.engine.decoding.policy import DraftPolicy
from app.engine.decoding.sampling import SamplingParams
from app.engine.features.arena import ArenaFinished, ArenaProgress, ArenaResult
from app.engine.features.baselines import MEASURE_TOKENS, BaselineMeasured
from app.engine.features.lossless import LosslessReport, LosslessVerdict
from app.engine.features.prompts import BenchPrompt
from app.engine.policy.modes import SpeculationMode, make_policy

__all__ = [
    "AcceptanceRule",
    "ArenaFinished",
    "ArenaProgress",
    "ArenaResult",
    "BaselineMeasured",
    "BenchPrompt",
    "CheckLossless",
    "Command",
    "ContextOverflow",
    "Device",
    "EngineError",
    "ErrorKind",
    "Event",
    "FinishReason",
    "Generate",
    "GenerationContext",
    "GenerationFinished",
    "GenerationStats",
    "LoadPair",
    "LoadQueued",
    "LoadStarted",
    "LosslessReport",
    "LosslessVerdict",
    "MeasureBaseline",
    "PairLoaded",
    "PrefillProgress",
    "Provenance",
    "Reply",
    "ResetSession",
    "RoundEvent",
    "RunArena",
    "SamplingParams",
    "SpeculationMode",
    "SpeculationSettings",
    "TokenEvent",
    "WarmUpProgress",
    "WorkerMessage",
]


class Device(enum.StrEnum):
    """The device MLX runs on, for the window to say (the UI imports no mlx to ask itself)."""

    GPU = "gpu"
    CPU = "cpu"


class ContextOverflow(enum.StrEnum):
    """What a Generate does with a conversation longer than the main model reads; the values are
    what settings store."""

    REFUSE = "refuse"  # answer nothing and say so, with the numbers
    DROP_OLDEST = "drop_oldest"  # leave out the oldest turns (never the system prompt nor the latest)


# -- commands ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoadPair:
    """`warm_up`: compile every pass shape the adaptive controller may play before the pair is
    reported loaded (WarmUpProgress on the way); None: where the device builds kernels per
    shape (a GPU)."""

    main: str
    draft: str | None = None
    warm_up: bool | None = None
    # the main split across N local processes or an mlx.launch hostfile's Macs (`distributed`)
    ranks: int | None = None
    hostfile: str | None = None


@dataclass(frozen=True, slots=True)
class SpeculationSettings:
    """`acceptance`: None means residual when sampling, exact when greedy.

    Plain strings are accepted for the mode and the rule (settings store them so) and become
    the enums (`SpeculationMode.parse`: "plain" still means off); an unknown one is refused
    here rather than when the worker reaches it.
    """

    mode: SpeculationMode = SpeculationMode.ADAPTIVE
    k: int = 4
    acceptance: AcceptanceRule | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", SpeculationMode.parse(self.mode))
        if self.acceptance is not None:
            object.__setattr__(self, "acceptance", AcceptanceRule(self.acceptance))

    @property
    def adaptive(self) -> bool:
        """Whether the policy learns across answers (the worker keeps one per loaded pair)."""
        return self.mode.adaptive

    def policy(self) -> DraftPolicy:
        """A fresh policy of this mode (the worker keeps adaptive ones per pair: `PairPolicies`)."""
        return make_policy(self.mode, self.k)


@dataclass(frozen=True, slots=True)
class Generate:
    """`prompt`: a raw prompt instead of a chat (the local API's `/v1/completions`): encoded by
    the tokenizer with no chat template; `messages` is empty then."""

    messages: tuple[dict[str, str], ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    speculation: SpeculationSettings = field(default_factory=SpeculationSettings)
    max_tokens: int = 512
    overflow: ContextOverflow = ContextOverflow.REFUSE
    prompt: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "overflow", ContextOverflow(self.overflow))


@dataclass(frozen=True, slots=True)
class ResetSession:
    """Forget the conversation held in the caches (a new chat)."""


@dataclass(frozen=True, slots=True)
class CheckLossless:
    """Replay `answer` (token ids) greedily without the draft, after `messages` (the turns before it).

    `prompt_tokens`: the prompt length recorded when the answer was written; a different length
    now means the conversation before it changed, and the replay would compare different things.
    """

    messages: tuple[dict[str, str], ...]
    answer: tuple[int, ...]
    prompt_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class RunArena:
    """Rank `candidates` (draft folders, or arena.LOOKUP) for `main` over `prompts` (empty: built-ins)."""

    main: str
    candidates: tuple[str, ...]
    prompts: tuple[BenchPrompt, ...] = ()
    k: int = 4
    max_tokens: int = 64
    save: bool = True


@dataclass(frozen=True, slots=True)
class MeasureBaseline:
    """Time plain decoding of the loaded main at about `context_tokens` (background work: it
    yields to any command queued behind it)."""

    context_tokens: int
    tokens: int = MEASURE_TOKENS


Command = LoadPair | Generate | ResetSession | CheckLossless | RunArena | MeasureBaseline


# -- the worker's own results --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PairLoaded:
    main: str
    draft: str | None
    speculation_refusal: str | None
    device: Device | None = None  # where MLX runs the pair; None when the sender does not say
    machines: int | None = None  # ranks the main is split over; None: in this process alone


@dataclass(frozen=True, slots=True)
class LoadQueued:
    """A load submitted while other work runs or waits: sent at once, as that work is told to
    stop. `stopping`: what runs stops at its next safe point (an answer, the arena, a check, a
    measurement, a load between two tensors); False: it is a main split over several machines
    being loaded, which cannot stop halfway, so this one waits for it."""

    stopping: bool


@dataclass(frozen=True, slots=True)
class LoadStarted:
    """The load that was queued (`LoadQueued`) begins now."""


@dataclass(frozen=True, slots=True)
class GenerationContext:
    """Sent before a generation's prefill: the context it decodes at, for the baseline lookup."""

    main: str
    prompt_tokens: int


Reply = (
    Event
    | PairLoaded
    | LoadQueued
    | LoadStarted
    | GenerationContext
    | LosslessReport
    | ArenaProgress
    | ArenaFinished
    | BaselineMeasured
)


@dataclass(frozen=True, slots=True)
class WorkerMessage:
    """One reply, tagged with the request (from `submit`) it answers."""

    request: int
    event: Reply
