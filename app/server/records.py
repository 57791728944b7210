"""What the server is given (the engine, the models) and what it reports (each served request)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.engine.library.facts import ModelFacts
from app.engine.library.roles import suggested_role
from app.engine.protocol import Command, WorkerMessage

Sink = Callable[[WorkerMessage], None]


class EngineHandle(Protocol):
    """The part of an engine worker the server uses: `EngineWorker`, or the window's engine."""

    def submit(self, command: Command, sink: Sink | None = None) -> int: ...
    def cancel(self, request: int | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class LibraryModel:
    """A model of the user's library, listed by `/v1/models` with the roles it suits."""

    id: str
    roles: tuple[str, ...] = ()  # "main", "draft"


def library_models(facts: Sequence[ModelFacts]) -> tuple[LibraryModel, ...]:
    """The library's usable models with the role the picker suggests for each."""
    usable = [f for f in facts if f.usable]
    return tuple(LibraryModel(str(f.path), (suggested_role(f, usable),)) for f in usable)


@dataclass(frozen=True, slots=True)
class ModelsInfo:
    """What is loaded now. `main`/`draft`: the folders (None: nothing loaded). `plain_tokens_per_second`:
    the main's plain decoding speed where known, for `speedup_vs_plain`."""

    main: str | None
    draft: str | None = None
    library: tuple[LibraryModel, ...] = ()
    plain_tokens_per_second: float | None = None


@dataclass(frozen=True, slots=True)
class ServedRecord:
    """One served request, for the window's log pane and the CLI's log line. `time`: Unix
    seconds when it arrived; `finish_reason`: "stop", "length", "cancelled" or "error"."""

    time: float
    client: str
    endpoint: str
    prompt_tokens: int
    tokens: int
    tokens_per_second: float
    speedup_vs_plain: float | None
    accepted: int
    proposed: int
    finish_reason: str
    text: str
    reused_prompt_tokens: int = 0
    status: int = 200
