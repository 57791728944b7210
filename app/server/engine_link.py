"""From the worker's thread to the server's loop: one command's replies as an async iterator.

The worker calls the sink on its own thread; the sink hands each reply to the loop with
`call_soon_threadsafe`. A consumer that stops early (its client went away, a stop string was
met) cancels the request, so decoding stops at the worker's next safe point."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from app.engine.protocol import (
    Command,
    EngineError,
    ErrorKind,
    GenerationFinished,
    Reply,
    WorkerMessage,
)
from app.server.records import EngineHandle


def is_last(event: Reply) -> bool:
    """A Generate's last reply: its answer, or an error that ends it (a notice does not)."""
    return isinstance(event, GenerationFinished) or (
        isinstance(event, EngineError) and event.kind is not ErrorKind.NOTICE
    )


class Exchange:
    """One command on the worker; iterate `replies()` once, then `finish()` (in a `finally`)."""

    def __init__(self, engine: EngineHandle, command: Command) -> None:
        self._engine = engine
        self._loop = asyncio.get_running_loop()
        self._inbox: asyncio.Queue[Reply] = asyncio.Queue()
        self.ended = asyncio.Event()  # the worker sent the last reply
        self.request = engine.submit(command, sink=self._sink)

    def _sink(self, message: WorkerMessage) -> None:
        """On the worker's thread: never raise there, even once the loop has closed."""
        try:
            self._loop.call_soon_threadsafe(self._inbox.put_nowait, message.event)
        except RuntimeError:
            pass

    async def replies(self) -> AsyncIterator[Reply]:
        while True:
            event = await self._inbox.get()
            if is_last(event):
                self.ended.set()
            yield event
            if self.ended.is_set():
                return

    async def finish(self) -> GenerationFinished | None:
        """Cancel the request unless it has ended, and wait for its answer (what was written
        before it stopped), so the log records it; None if the worker ends it with an error."""
        if not self.ended.is_set():
            self._engine.cancel(self.request)
        last: Reply | None = None
        while not self.ended.is_set():
            event = await self._inbox.get()
            if is_last(event):
                self.ended.set()
                last = event
        return last if isinstance(last, GenerationFinished) else None
