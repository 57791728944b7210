"""The conversation as the app holds it: user turns and answers with typed stats, free of Qt.

The chat controller owns one `Transcript` and changes it only through its methods; widgets read
it and hear of changes through plain callbacks, so the conversation can be tested and stored
without a display. Storage (app.engine.store.conversations) reads and writes these records; the
stats keep the JSON keys they were first stored under, so every database ever written loads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, ClassVar

from app.engine.store.provenance import Answer


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class MessageState(StrEnum):
    COMPLETE = "complete"
    PARTIAL = "partial"  # checkpointed mid-answer: still streaming, or the app stopped while it did
    CANCELLED = "cancelled"
    ERROR = "error"

    @classmethod
    def read(cls, raw: object) -> MessageState:
        """A stored state; anything unreadable counts as complete, as the first schema's default."""
        try:
            return cls(str(raw))
        except ValueError:
            return cls.COMPLETE


class Verdict(StrEnum):
    IDENTICAL = "identical"
    NEAR_TIE = "near-tie"
    WIDE_MARGIN = "wide-margin"
    NOT_CHECKED = "not-checked"  # the check was refused (sampled answer, other model loaded ...)
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class LosslessVerdict:
    """What a greedy replay of an answer without the draft found, or why it did not run."""

    verdict: Verdict
    message: str
    position: int | None = None  # index in the answer of the first divergence
    compared: int | None = None
    top2_margin: float | None = None
    answer_gap: float | None = None

    @property
    def measured(self) -> bool:
        """A replay reached a verdict: worth keeping with the message, unlike a refusal or an error
        (loading the right model may lift those)."""
        return self.verdict in (Verdict.IDENTICAL, Verdict.NEAR_TIE, Verdict.WIDE_MARGIN)

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, raw: object) -> LosslessVerdict | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("message"), str):
            return None
        try:
            verdict = Verdict(str(raw.get("verdict")))
        except ValueError:
            return None
        return cls(
            verdict,
            raw["message"],
            _int(raw.get("position")),
            _int(raw.get("compared")),
            _float(raw.get("top2_margin")),
            _float(raw.get("answer_gap")),
        )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _ids(value: object) -> tuple[int, ...] | None:
    if not isinstance(value, (list, tuple)) or not all(_int(v) is not None for v in value):
        return None
    return tuple(value)


def _pair(value: object) -> tuple[int, int] | None:
    ids = _ids(value)
    return (ids[0], ids[1]) if ids is not None and len(ids) == 2 else None


@dataclass(frozen=True, slots=True)
class AnswerStats:
    """One answer's numbers, as the status strip, the tooltip and the losslessness check read them."""

    tokens: int = 0
    tokens_per_second: float = 0.0
    first_token_seconds: float | None = None  # from the request to the first token, engine clock
    rounds: int = 0
    proposed: int = 0
    accepted: int = 0
    acceptance: float = 0.0  # accepted over proposed
    mean_accepted: float = 0.0  # accepted drafts per drafting round (older answers: per round)
    k: int = 0  # the draft length of the last round
    bypassed: bool = False  # the adaptive policy paused speculation
    mode: str = ""
    draft_rarely_right: tuple[int, int] | None = None  # (right, judged) when the draft almost never is
    draft_stopped: str | None = None  # why drafting stopped mid-answer (the draft's context ended)
    plain_tokens_per_second: float | None = None
    speedup: float | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    reused_tokens: int | None = None
    prefill_seconds: float | None = None
    decode_seconds: float | None = None
    # what wrote the answer: a greedy replay means something only with the same model at temperature 0
    main: str | None = None
    draft: str | None = None
    temperature: float | None = None
    token_ids: tuple[int, ...] = ()
    lossless: LosslessVerdict | None = None
    drafting_rounds: int | None = None  # rounds that proposed something; None: stored before it was counted
    lookup_accepted: int | None = None  # of `accepted`, those prompt lookup guessed
    # the range plain's speed is sure to be in (9 times in 10), when it was measured under this
    # answer's conditions; None: stored before ranges were kept
    plain_low: float | None = None
    plain_high: float | None = None

    # field -> (JSON key, reader): the keys are those of the first stored stats, kept so old rows load
    _JSON: ClassVar[dict[str, tuple[str, Callable[[object], object]]]] = {
        "tokens": ("tokens", _int),
        "tokens_per_second": ("tok_s", _float),
        "first_token_seconds": ("ttft_s", _float),
        "rounds": ("rounds", _int),
        "proposed": ("proposed", _int),
        "accepted": ("accepted", _int),
        "acceptance": ("acceptance", _float),
        "mean_accepted": ("mean_accepted", _float),
        "k": ("k", _int),
        "bypassed": ("bypassed", _bool),
        "mode": ("mode", _str),
        "draft_rarely_right": ("draft_rarely_right", _pair),
        "draft_stopped": ("draft_stopped", _str),
        "plain_tokens_per_second": ("plain_tok_s", _float),
        "speedup": ("speedup", _float),
        "finish_reason": ("reason", _str),
        "prompt_tokens": ("prompt_tokens", _int),
        "reused_tokens": ("reused_tokens", _int),
        "prefill_seconds": ("prefill_s", _float),
        "decode_seconds": ("decode_s", _float),
        "main": ("main", _str),
        "draft": ("draft", _str),
        "temperature": ("temperature", _float),
        "token_ids": ("token_ids", _ids),
        "lossless": ("lossless", LosslessVerdict.from_json),
        "drafting_rounds": ("drafting_rounds", _int),
        "lookup_accepted": ("lookup_accepted", _int),
        "plain_low": ("plain_low", _float),
        "plain_high": ("plain_high", _float),
    }

    def to_json(self) -> dict[str, Any]:
        """Unset values are left out; reading fills them back in with the same defaults."""
        out: dict[str, Any] = {}
        for name, (key, _read) in self._JSON.items():
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, LosslessVerdict):
                value = value.to_json()
            elif isinstance(value, tuple):
                value = list(value)
            out[key] = value
        return out

    @classmethod
    def from_json(cls, raw: object) -> tuple[AnswerStats, bool]:
        """The stats and whether some value could not be read (it keeps its default)."""
        if not isinstance(raw, dict):
            return cls(), raw is not None
        values: dict[str, Any] = {}
        damaged = False
        for name, (key, read) in cls._JSON.items():
            if key not in raw or raw[key] is None:
                continue
            value = read(raw[key])
            if value is None:
                damaged = True
            else:
                values[name] = value
        return cls(**values), damaged


@dataclass(frozen=True, slots=True)
class UserTurn:
    key: int  # the message's id in storage
    text: str
    role: ClassVar[Role] = Role.USER
    state: ClassVar[MessageState] = MessageState.COMPLETE


@dataclass(slots=True)
class AnswerTurn:
    """An answer; its tokens grow in place while it streams (only the UI thread touches it)."""

    key: int
    answer: Answer = field(default_factory=Answer)
    state: MessageState = MessageState.COMPLETE
    stats: AnswerStats = field(default_factory=AnswerStats)
    live: bool = False  # tokens are still arriving
    settled: int = 0  # tokens whose round is over, so whether each draft was refused is known
    checking: bool = False  # a losslessness check of it is running
    role: ClassVar[Role] = Role.ASSISTANT

    @property
    def text(self) -> str:
        return self.answer.text


Turn = UserTurn | AnswerTurn


class Change(StrEnum):
    """What an observer is told; each comes with the turn concerned (None for RESET)."""

    RESET = "reset"  # the whole list changed (a load, an edit, a regenerate): draw it again
    APPENDED = "appended"  # a turn was added at the end
    EXTENDED = "extended"  # the live answer has more settled tokens
    FINISHED = "finished"  # the live answer stopped growing; its state and stats are final
    UPDATED = "updated"  # a turn's verdict or check changed: its look changes, not its text
    STATS = "stats"  # an answer's state or stats changed (a checkpoint): nothing to draw


Observer = Callable[[Change, Turn | None], None]


class Transcript:
    """The turns of one conversation, in order, and who to tell when they change."""

    def __init__(self, turns: Iterable[Turn] = ()) -> None:
        self._turns: list[Turn] = list(turns)
        self.observers: list[Observer] = []

    def _tell(self, change: Change, turn: Turn | None) -> None:
        for observer in list(self.observers):
            observer(change, turn)

    # -- reading --------------------------------------------------------------------------------
    @property
    def turns(self) -> tuple[Turn, ...]:
        return tuple(self._turns)

    def __len__(self) -> int:
        return len(self._turns)

    def __iter__(self) -> Iterator[Turn]:
        return iter(tuple(self._turns))

    def find(self, key: int) -> Turn | None:
        return next((t for t in self._turns if t.key == key), None)

    def position(self, key: int) -> int | None:
        return next((i for i, t in enumerate(self._turns) if t.key == key), None)

    def answer(self, key: int) -> AnswerTurn | None:
        turn = self.find(key)
        return turn if isinstance(turn, AnswerTurn) else None

    def last_answer(self) -> AnswerTurn | None:
        return next((t for t in reversed(self._turns) if isinstance(t, AnswerTurn)), None)

    def last_question(self) -> str:
        return next((t.text for t in reversed(self._turns) if isinstance(t, UserTurn)), "")

    def chat(self, system_prompt: str = "", before: int | None = None) -> tuple[dict[str, str], ...]:
        """The messages a chat template takes: the system prompt, then the turns before `before`
        (a position; None: all of them)."""
        out = [{"role": "system", "content": system_prompt}] if system_prompt else []
        out += [{"role": t.role.value, "content": t.text} for t in self._turns[:before]]
        return tuple(out)

    # -- changing -------------------------------------------------------------------------------
    def reset(self, turns: Iterable[Turn] = ()) -> None:
        self._turns = list(turns)
        self._tell(Change.RESET, None)

    def append_user(self, key: int, text: str) -> UserTurn:
        """`text` as the store wrote it: cleaned there, once (app.engine.store.chat_log)."""
        turn = UserTurn(key, text)
        self._turns.append(turn)
        self._tell(Change.APPENDED, turn)
        return turn

    def start_answer(self, key: int) -> AnswerTurn:
        turn = AnswerTurn(key, state=MessageState.PARTIAL, live=True)
        self._turns.append(turn)
        self._tell(Change.APPENDED, turn)
        return turn

    def extend_answer(self, turn: AnswerTurn, settled: int) -> None:
        """`settled` tokens of the live answer are ready to show (its tokens were added in place)."""
        if settled > turn.settled:
            turn.settled = settled
            self._tell(Change.EXTENDED, turn)

    def finish_answer(self, turn: AnswerTurn, state: MessageState, stats: AnswerStats) -> None:
        turn.live, turn.state, turn.stats = False, state, stats
        turn.settled = len(turn.answer.parts)
        self._tell(Change.FINISHED, turn)

    def checkpoint(self, turn: AnswerTurn, state: MessageState, stats: AnswerStats) -> None:
        """The answer's state and stats as of now, for saving; nothing to draw."""
        turn.state, turn.stats = state, stats
        self._tell(Change.STATS, turn)

    def edit(self, key: int, text: str) -> int:
        """Replace a user turn's text (as the store wrote it) and drop every turn after it;
        returns its position."""
        position = self.position(key)
        if position is None or not isinstance(self._turns[position], UserTurn):
            raise KeyError(f"no user turn {key}")
        self._turns[position] = UserTurn(key, text)
        del self._turns[position + 1 :]
        self._tell(Change.RESET, None)
        return position

    def question_before(self, key: int | None = None) -> UserTurn | None:
        """The question the answer `key` (None: the last turn) answered: the one a regenerate
        asks again; None when there is none."""
        position = self.position(key) if key else None
        index = len(self._turns) - 1 if position is None else position
        return next((t for t in reversed(self._turns[: index + 1]) if isinstance(t, UserTurn)), None)

    def drop_after(self, key: int) -> None:
        """Drop every turn after the turn `key` (once the store has)."""
        position = self.position(key)
        if position is None:
            raise KeyError(f"no turn {key}")
        del self._turns[position + 1 :]
        self._tell(Change.RESET, None)

    def update_stats(self, turn: AnswerTurn, stats: AnswerStats) -> None:
        """A finished answer's stats were completed later (its plain speed became known): its
        line changes, its text does not."""
        turn.stats = stats
        self._tell(Change.UPDATED, turn)

    def start_check(self, turn: AnswerTurn) -> None:
        """A losslessness check of `turn` is running; its last verdict no longer stands."""
        turn.checking = True
        turn.stats = replace(turn.stats, lossless=None)
        self._tell(Change.UPDATED, turn)

    def record_verdict(self, turn: AnswerTurn, verdict: LosslessVerdict | None) -> None:
        """A check of `turn` ended or was refused: keep its verdict (None: cancelled, nothing found)."""
        turn.checking = False
        turn.stats = replace(turn.stats, lossless=verdict)
        self._tell(Change.UPDATED, turn)
