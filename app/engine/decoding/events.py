"""Messages the engine emits. Every one crosses a thread, so each is a frozen dataclass."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class FinishReason(enum.StrEnum):
    """Why a generation ended (stored with the answer as these strings)."""

    STOP = "stop"  # the model emitted an end-of-turn token
    LENGTH = "length"  # max_tokens reached
    CANCELLED = "cancelled"


class ErrorKind(enum.StrEnum):
    """What an EngineError reports: the UI words its message and recovery by this."""

    ERROR = "error"
    CRASH = "crash"  # an unexpected exception in a command (a bug)
    LOAD = "load"  # the model files could not be loaded
    STATE = "state"  # the command does not fit now (no model loaded, nothing to compare, ...)
    TEMPLATE = "template"  # the model's chat template failed on the conversation
    CONTEXT = "context"  # the conversation is longer than the main model reads
    NOTICE = "notice"  # information only: the command goes on
    RANKS_LOST = "ranks_lost"  # a machine holding part of the main stopped answering: reload locally


class Provenance(str, enum.Enum):
    """Who chose a token: the UI colours tokens by this."""

    MAIN = "main"  # sampled from the main model (correction or bonus token)
    DRAFT = "draft"  # proposed by the draft model and accepted by the main
    LOOKUP = "lookup"  # proposed by prompt lookup (no model) and accepted


class Reason(str, enum.Enum):
    """Why a round played its k (the status strip and the round logs say so; a string on the wire)."""

    PLAIN = "plain"  # a policy that never drafts (mode off)
    FIXED = "fixed"  # a fixed draft length
    LEARN = "learn"  # adaptive, too little measured yet: its starting k
    BEST = "best"  # adaptive: the k with the best expected tokens/s (Leviathan, measured costs)
    BYPASS = "bypass"  # adaptive: no k beats plain by the margin, so plain
    PROBE = "probe"  # adaptive: a budgeted draft round while bypassed, to notice a draft that starts to pay


@dataclass(frozen=True, slots=True)
class Decision:
    """What a policy decided for a round, and the estimates behind it."""

    reason: Reason
    k: int  # the k planned (the loop may play less near the end)
    source: Provenance = Provenance.DRAFT
    expected_speedup: float = 0.0  # predicted for the planned k over plain (0: not known)
    speedup_by_k: tuple[float, ...] = ()  # predicted for k = 1..MAX_K from the draft model
    acceptance: tuple[float, ...] = ()  # the draft's acceptance by position behind it
    draft_right: tuple[int, int] | None = None  # (right, judged) when the draft is almost never right
    draft_stopped: str | None = None  # why drafting stopped for good (the draft's context ended)

    @property
    def bypassed(self) -> bool:
        return self.reason is Reason.BYPASS


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """One emitted token. `text` may be empty when the token ends mid-character."""

    id: int
    text: str
    provenance: Provenance
    time: float  # seconds since the generation started (engine clock, not repaint time)
    round: int  # index of the round that emitted it
    index: int  # position of the token in this answer, from 0


@dataclass(frozen=True, slots=True)
class RoundEvent:
    """Telemetry of one draft-and-verify round; k == 0 is a plain decoding step."""

    index: int
    k: int
    proposed: tuple[int, ...]  # every draft token, rejected ones included
    accepted: int
    emitted: tuple[int, ...]  # accepted drafts followed by the main's own token
    draft_seconds: float
    verify_seconds: float
    source: Provenance = Provenance.MAIN  # DRAFT or LOOKUP when tokens were proposed
    decision: Decision = Decision(Reason.PLAIN, 0)  # what the policy decided, and why
    catch_up: int = 0  # skipped tokens the draft read before proposing (after a bypass)
    # a plain step whose pass overlapped another round's (queued under the previous round, or
    # queueing the next): its seconds are not one pass's own cost. A queued round's seconds are
    # the time between the two rounds' reads, so over a run they add up to plain's real time
    overlapped: bool = False
    # the refused drafts (`proposed[accepted:]`) decoded, for display. The worker fills it in
    # as it forwards the event, so the UI needs no tokenizer and the timed loop does no decoding
    refused_text: str = ""


@dataclass(frozen=True, slots=True)
class PrefillProgress:
    """Prompt processing progress, sent between chunks."""

    done: int
    total: int
    seconds: float


@dataclass(frozen=True, slots=True)
class WarmUpProgress:
    """After a pair loads on a GPU: pass shapes compiled so far (one per draft length), before
    the first answer times any of them."""

    done: int
    total: int


@dataclass(frozen=True, slots=True)
class GenerationStats:
    """What a finished (or cancelled) answer cost and what speculation bought."""

    prompt_tokens: int
    reused_tokens: int  # prompt tokens already in the caches from earlier turns
    tokens: int
    prefill_seconds: float
    decode_seconds: float
    rounds: int
    proposed: int
    accepted: int

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.decode_seconds if self.decode_seconds > 0 else 0.0

    @property
    def acceptance(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def mean_accepted_per_round(self) -> float:
        return self.accepted / self.rounds if self.rounds else 0.0


@dataclass(frozen=True, slots=True)
class GenerationFinished:
    """Last event of a generation.

    `tail` is text the detokenizer held back (an unfinished character at the very end); it is
    already part of `text` but belongs to no TokenEvent.
    """

    reason: FinishReason
    text: str
    token_ids: tuple[int, ...]
    stats: GenerationStats
    tail: str = ""


@dataclass(frozen=True, slots=True)
class EngineError:
    """A failure reported to the caller instead of raised across a thread. `message` is the
    technical account; `plain`, where set, says the same in words anyone understands, and the
    window shows it first with the message behind a Details toggle."""

    message: str
    kind: ErrorKind = ErrorKind.ERROR
    plain: str = ""


Event = TokenEvent | RoundEvent | PrefillProgress | WarmUpProgress | GenerationFinished | EngineError
