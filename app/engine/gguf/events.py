"""What a GGUF import reports. Each crosses a process (as JSON) and a thread, so each is frozen."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ImportProgress:
    """`stage` is validate, hash, tensors, write or tokenizer; done/total are in its own units."""

    stage: str
    done: int
    total: int
    message: str = ""


@dataclass(frozen=True, slots=True)
class ImportFinished:
    """The model folder is complete and in place; `existing`: it already was, from an earlier
    import of the same file, and nothing was converted."""

    path: str
    seconds: float
    peak_rss_bytes: int  # the child process's peak resident memory (0 when unknown)
    existing: bool = False


@dataclass(frozen=True, slots=True)
class ImportFailed:
    """`kind`: invalid (malformed file), refused (valid, but not importable here), limit (ended
    for passing its memory or time limit), crashed, cancelled or error. Nothing that looks like a model was left behind."""

    message: str
    kind: str = "error"


ImportEvent = ImportProgress | ImportFinished | ImportFailed
_KINDS: dict[str, type[ImportEvent]] = {c.__name__: c for c in (ImportProgress, ImportFinished, ImportFailed)}


def to_json(event: ImportEvent) -> dict[str, Any]:
    return {"event": type(event).__name__, **asdict(event)}


def from_json(data: dict[str, Any]) -> ImportEvent:
    data = dict(data)
    cls = _KINDS[data.pop("event")]
    return cls(**data)
