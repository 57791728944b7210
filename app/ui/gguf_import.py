"""Importing a GGUF file from the window: the child-process import is consumed on a helper thread
under qasync's event loop, and each of its events becomes a line of status text."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

_RUNNING: set[asyncio.Task[None]] = set()


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


def start_import(path: str, show: Callable[[str], None], done: Callable[[], None]) -> bool:
    """False when the app's event loop is not running (the window was built without it)."""
    try:
        loop = asyncio.get_event_loop()
    except RuntimeError:
        return False
    if not loop.is_running():
        return False
    task = loop.create_task(_import(path, show, done))
    _RUNNING.add(task)  # the loop holds tasks weakly: one nobody references can vanish mid-import
    task.add_done_callback(_RUNNING.discard)
    return True


async def _import(path: str, show: Callable[[str], None], done: Callable[[], None]) -> None:
    from app.engine.gguf.child import run_import

    loop = asyncio.get_running_loop()
    name = Path(path).name

    def consume() -> None:
        for event in run_import(path):
            loop.call_soon_threadsafe(show, describe(name, event))

    await asyncio.to_thread(consume)
    done()
