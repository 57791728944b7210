"""`ServerRunner`: the aiohttp server on an asyncio loop in a thread of its own.

The window's Qt loop never parses HTTP and the CLI needs no Qt: the same runner serves both.
`on_served` is called on the server's thread; a Qt caller hands it on to its own thread."""

from __future__ import annotations

import asyncio
import errno
import threading
from collections.abc import Callable

from aiohttp import web

from app.server.config import ServerConfig
from app.server.records import EngineHandle, LibraryModel, ModelsInfo, ServedRecord
from app.server.routes import build_app

__all__ = [
    "EngineHandle",
    "LibraryModel",
    "ModelsInfo",
    "ServedRecord",
    "ServerConfig",
    "ServerRunner",
    "ServerStartError",
]

START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0


class ServerStartError(RuntimeError):
    """The server could not start; the message is one line a user can act on."""


class ServerRunner:
    """Serves `engine` over HTTP from `start()` until `stop()`; both return promptly."""

    def __init__(
        self,
        config: ServerConfig,
        engine: EngineHandle,
        models_fn: Callable[[], ModelsInfo],
        on_served: Callable[[ServedRecord], None] | None = None,
    ) -> None:
        self.config = config
        self._engine = engine
        self._models_fn = models_fn
        self._on_served = on_served or (lambda record: None)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._address: tuple[str, int] | None = None

    @property
    def address(self) -> tuple[str, int] | None:
        """(host, port) while serving, else None."""
        return self._address

    @property
    def base_url(self) -> str | None:
        """The URL clients use (`…/v1`), while serving."""
        if self._address is None:
            return None
        host, port = self._address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/v1"

    def _port(self) -> int:
        return self._address[1] if self._address is not None else self.config.port

    @property
    def running(self) -> bool:
        return self._address is not None

    def start(self) -> str:
        """Bind and serve; returns the base URL. Raises `ServerStartError` (port in use, a
        refused configuration) with nothing left running."""
        if self._thread is not None:
            raise ServerStartError("the server is already running")
        try:
            self.config.check()
        except ValueError as exc:
            raise ServerStartError(str(exc)) from None
        loop = asyncio.new_event_loop()
        started = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._bind())
            except BaseException as exc:
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._unbind())
                loop.close()

        thread = threading.Thread(target=serve, name="specchat-server", daemon=True)
        self._loop, self._thread = loop, thread
        thread.start()
        if not started.wait(START_TIMEOUT):
            raise ServerStartError("the server did not start in time")
        if failure:
            self._loop = self._thread = None
            raise ServerStartError(_start_words(failure[0], self.config)) from None
        url = self.base_url
        assert url is not None
        return url

    async def _bind(self) -> None:
        app = build_app(self.config, self._engine, self._models_fn, self._on_served, self._port)
        # handler_cancellation: a client that goes away cancels its handler, which cancels its
        # decoding (also while it still waits in the queue)
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=1.0, handler_cancellation=True
        )
        await runner.setup()
        site = web.TCPSite(runner, self.config.host, self.config.port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._address = (self.config.host, int(runner.addresses[0][1]))

    async def _unbind(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        self._runner = None

    def stop(self) -> None:
        """Stop serving: open streams end (their decoding is cancelled); idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._address = None
        loop.call_soon_threadsafe(loop.stop)
        thread.join(STOP_TIMEOUT)
        self._loop = self._thread = None


def _start_words(exc: BaseException, config: ServerConfig) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return f"port {config.port} on {config.host} is in use by another program; pick another port"
    if isinstance(exc, OSError) and exc.errno == errno.EADDRNOTAVAIL:
        return f"{config.host} is not an address of this computer"
    if isinstance(exc, OSError) and exc.errno == errno.EACCES:
        return f"port {config.port} needs administrator rights; pick a port above 1024"
    return f"the server could not start: {exc}"
