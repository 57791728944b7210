"""Importing a GGUF file from the window: the child-process import runs as a background job, and
each of its events becomes a line of status text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.ui.background import BackgroundTasks, Job


def describe(name: str, event: object) -> str:
    from app.engine.gguf.events import ImportFailed, ImportFinished, ImportProgress

    if isinstance(event, ImportProgress):
        share = f" {event.done * 100 // event.total}%" if event.total else ""
        return f"Importing {name}: {event.stage}{share}"
    if isinstance(event, ImportFinished):
        return f"Imported {name} in {event.seconds:.0f} s: {event.path}"
    if isinstance(event, ImportFailed):
        return f"Could not import {name}: {event.message}"
    return f"Importing {name}…"


def start_import(
    background: BackgroundTasks, path: str, show: Callable[[str], None], done: Callable[[], None]
) -> None:
    """Run the import off the GUI thread; closing the window cancels it with the other jobs."""
    from app.engine.gguf.child import run_import

    name = Path(path).name

    def consume(job: Job[str]) -> None:
        for event in run_import(path, cancel=job.cancelled):
            job.report(describe(name, event))

    def failed(exc: Exception) -> None:
        show(f"Could not import {name}: {exc}")
        done()

    background.start(consume, lambda _: done(), progress=show, failed=failed)
