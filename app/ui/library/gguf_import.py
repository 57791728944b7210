"""Importing a GGUF file from the window: the child-process import runs as a background job, and
each of its events becomes a line of status text; a failure is also handed to `failed`, in plain
words with the technical detail apart, which keeps it on screen until the user dismisses it. On a wait panel the import shows its progress,
time and estimate with a Cancel button. The model lands in the library's models folder, and
`imported` gets its folder, whether it was just converted or was there from an earlier import."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.ui.common.background import BackgroundTasks, Job
from app.ui.common.wait_progress import WaitPanel

STAGES = {
    "validate": "checking the file",
    "hash": "reading the file",
    "tensors": "converting the weights",
    "write": "writing the model",
    "tokenizer": "building the tokenizer",
}


# Failures whose engine message is technical: said in these words, the message behind Details.
PLAIN_FAILURES = {
    "invalid": "this is not a GGUF model file SpecChat can read: it may be damaged, or another kind of file",
    "crashed": "the import stopped unexpectedly",
    "error": "the import stopped unexpectedly",
}


def failure_words(kind: str, message: str) -> tuple[str, str]:
    """(the failure in plain words, the technical detail or "") for an ImportFailed."""
    plain = PLAIN_FAILURES.get(kind)
    return (plain, message) if plain else (message, "")


def describe(name: str, event: object) -> str:
    from app.engine.gguf.events import ImportFailed, ImportFinished, ImportProgress

    if isinstance(event, ImportProgress):
        share = f" {event.done * 100 // event.total}%" if event.total else ""
        return f"Importing {name}: {event.stage}{share}"
    if isinstance(event, ImportFinished) and event.existing:
        return f"{name} is already in your library"
    if isinstance(event, ImportFinished):
        return f"Imported {name} into your library in {event.seconds:.0f} s"
    if isinstance(event, ImportFailed):
        return f"Could not import {name}: {failure_words(event.kind, event.message)[0]}"
    return f"Importing {name}…"


def start_import(
    background: BackgroundTasks,
    path: str,
    show: Callable[[str], None],
    done: Callable[[], None],
    failed: Callable[[str, str], None],
    waits: WaitPanel | None = None,
    imported: Callable[[str], None] = lambda _path: None,
) -> None:
    """Run the import off the GUI thread; closing the window cancels it with the other jobs."""
    from app.engine.gguf.child import ImportFailed, ImportFinished, ImportProgress, run_import

    name = Path(path).name

    def consume(job: Job[object]) -> None:
        for event in run_import(path, cancel=job.cancelled):
            job.report(event)

    key = ("import", path)

    def progress(event: object) -> None:
        if waits is not None and isinstance(event, ImportProgress):
            stage = STAGES.get(event.stage, event.stage)
            waits.progress(key, event.done, event.total, f"Importing {name}: {stage}")
        elif waits is not None:
            waits.end(key, finished=isinstance(event, ImportFinished))
        show(describe(name, event))
        if isinstance(event, ImportFailed) and event.kind != "cancelled":
            words, detail = failure_words(event.kind, event.message)
            failed(f"Could not import {path}: {words}", detail)
        if isinstance(event, ImportFinished):
            imported(event.path)

    def crashed(exc: Exception) -> None:
        if waits is not None:
            waits.end(key, finished=False)
        show(f"Could not import {name}: {PLAIN_FAILURES['error']}")
        failed(f"Could not import {path}: {PLAIN_FAILURES['error']}", f"{type(exc).__name__}: {exc}")
        done()

    job = background.start(consume, lambda _: done(), progress=progress, failed=crashed)
    if waits is not None:  # per stage: each stage counts in its own units
        waits.begin(key, f"Importing {name}", memory="", cancel=job.cancel)
