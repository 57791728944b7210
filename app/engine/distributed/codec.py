"""The decode loop's events and the sampling settings as JSON data, and back, checked field by field.

Rank 0 streams events to the caller over `wire.py`'s channel. The caller rebuilds each one only
from fields of the expected type and range (`BadMessage` otherwise), so what a rank sends is
data the caller reads, never code or an object it did not mean to build. Keys it does not read
are ignored, so an event that still carries a field since retired decodes as well.
"""

from __future__ import annotations

import enum
import math
from dataclasses import asdict
from typing import Any, TypeVar

from app.engine.decoding.decode import GenerationEvent
from app.engine.decoding.events import (
    Decision,
    EngineError,
    ErrorKind,
    FinishReason,
    GenerationFinished,
    GenerationStats,
    PrefillProgress,
    Provenance,
    Reason,
    RoundEvent,
    TokenEvent,
)
from app.engine.decoding.sampling import SamplingParams

MAX_TEXT = 1 << 22  # characters in one text field (an answer's whole text included)
MAX_ITEMS = 1 << 20  # items in one list (token ids)
_E = TypeVar("_E", bound=enum.Enum)


class BadMessage(ValueError):
    """A rank's message that is not what this SpecChat sends: refused, never acted on."""


def _get(data: object, key: str) -> object:
    if not isinstance(data, dict) or key not in data:
        raise BadMessage(f"the message has no {key!r}")
    return data[key]


def _int(value: object, low: int = 0) -> int:
    if type(value) is not int or not low <= value < 1 << 63:
        raise BadMessage(f"expected a whole number, got {type(value).__name__}")
    return value


def _float(value: object) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):  # type: ignore[arg-type]
        raise BadMessage(f"expected a number, got {type(value).__name__}")
    return float(value)  # type: ignore[arg-type]


def _bool(value: object) -> bool:
    if type(value) is not bool:
        raise BadMessage(f"expected true or false, got {type(value).__name__}")
    return value


def _str(value: object, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise BadMessage("expected text")
    return value


def _list(value: object) -> list[object]:
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise BadMessage("expected a list")
    return value


def _ints(value: object) -> tuple[int, ...]:
    return tuple(_int(v) for v in _list(value))


def _enum(kind: type[_E], value: object) -> _E:
    try:
        return kind(_str(value, 64))
    except ValueError as exc:
        raise BadMessage(f"{value!r} is not a {kind.__name__}") from exc


def _floats(value: object) -> tuple[float, ...]:
    return tuple(_float(v) for v in _list(value))


def _decision(data: object) -> Decision:
    right = _get(data, "draft_right")
    stopped = _get(data, "draft_stopped")
    pair = _ints(right) if right is not None else None
    if pair is not None and len(pair) != 2:
        raise BadMessage("draft_right is not a pair")
    return Decision(
        reason=_enum(Reason, _get(data, "reason")),
        k=_int(_get(data, "k")),
        source=_enum(Provenance, _get(data, "source")),
        expected_speedup=_float(_get(data, "expected_speedup")),
        speedup_by_k=_floats(_get(data, "speedup_by_k")),
        acceptance=_floats(_get(data, "acceptance")),
        draft_right=(pair[0], pair[1]) if pair is not None else None,
        draft_stopped=None if stopped is None else _str(stopped, 4096),
    )


_KINDS: dict[type, str] = {
    TokenEvent: "token",
    RoundEvent: "round",
    PrefillProgress: "prefill",
    GenerationFinished: "finished",
    EngineError: "error",
}


def event_data(event: GenerationEvent) -> dict[str, Any]:
    """An event as JSON-ready data: its dataclass fields, and which event under "event"."""
    return {"event": _KINDS[type(event)], **asdict(event)}


def _round(data: object) -> RoundEvent:
    return RoundEvent(
        index=_int(_get(data, "index")),
        k=_int(_get(data, "k")),
        proposed=_ints(_get(data, "proposed")),
        accepted=_int(_get(data, "accepted")),
        emitted=_ints(_get(data, "emitted")),
        draft_seconds=_float(_get(data, "draft_seconds")),
        verify_seconds=_float(_get(data, "verify_seconds")),
        source=_enum(Provenance, _get(data, "source")),
        decision=_decision(_get(data, "decision")),
        catch_up=_int(_get(data, "catch_up")),
        overlapped=_bool(_get(data, "overlapped")),
        refused_text=_str(_get(data, "refused_text")),
    )


def _stats(data: object) -> GenerationStats:
    return GenerationStats(
        prompt_tokens=_int(_get(data, "prompt_tokens")),
        reused_tokens=_int(_get(data, "reused_tokens")),
        tokens=_int(_get(data, "tokens")),
        prefill_seconds=_float(_get(data, "prefill_seconds")),
        decode_seconds=_float(_get(data, "decode_seconds")),
        rounds=_int(_get(data, "rounds")),
        proposed=_int(_get(data, "proposed")),
        accepted=_int(_get(data, "accepted")),
    )


def error_from_data(data: object) -> EngineError:
    return EngineError(
        message=_str(_get(data, "message")),
        kind=_enum(ErrorKind, _get(data, "kind")),
        plain=_str(_get(data, "plain")),
    )


def event_from_data(data: object) -> GenerationEvent:
    """The event `data` describes, every field checked; BadMessage for anything else."""
    kind = _get(data, "event")
    if kind == "token":
        return TokenEvent(
            id=_int(_get(data, "id")),
            text=_str(_get(data, "text")),
            provenance=_enum(Provenance, _get(data, "provenance")),
            time=_float(_get(data, "time")),
            round=_int(_get(data, "round")),
            index=_int(_get(data, "index")),
        )
    if kind == "round":
        return _round(data)
    if kind == "prefill":
        return PrefillProgress(
            done=_int(_get(data, "done")),
            total=_int(_get(data, "total")),
            seconds=_float(_get(data, "seconds")),
        )
    if kind == "finished":
        return GenerationFinished(
            reason=_enum(FinishReason, _get(data, "reason")),
            text=_str(_get(data, "text")),
            token_ids=_ints(_get(data, "token_ids")),
            stats=_stats(_get(data, "stats")),
            tail=_str(_get(data, "tail")),
        )
    if kind == "error":
        return error_from_data(data)
    raise BadMessage(f"unknown event kind {kind!r}")


def sampling_data(params: SamplingParams | None) -> dict[str, Any] | None:
    return None if params is None else asdict(params)


def sampling_from_data(data: object) -> SamplingParams | None:
    """The caller's sampling settings (checked as the caller's own constructor checks them)."""
    if data is None:
        return None
    seed = _get(data, "seed")
    try:
        return SamplingParams(
            temperature=_float(_get(data, "temperature")),
            top_p=_float(_get(data, "top_p")),
            top_k=_int(_get(data, "top_k")),
            min_p=_float(_get(data, "min_p")),
            repetition_penalty=_float(_get(data, "repetition_penalty")),
            repetition_context=_int(_get(data, "repetition_context")),
            seed=None if seed is None else _int(seed, -(1 << 63)),
        )
    except BadMessage:
        raise
    except ValueError as exc:
        raise BadMessage(str(exc)) from exc
