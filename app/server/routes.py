"""The endpoints: `/health`, `/v1/models`, `/v1/chat/completions`, `/v1/completions`.

Every API request goes through the engine's one queue (the window's chat too), so answers are
written one at a time in arrival order; `max_queue` bounds how many API requests wait or run."""

from __future__ import annotations

import asyncio
import collections
import json
import math
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from app.engine.protocol import (
    EngineError,
    ErrorKind,
    FinishReason,
    Generate,
    GenerationContext,
    GenerationFinished,
    TokenEvent,
)
from app.server.config import ServerConfig
from app.server.engine_link import Exchange
from app.server.errors import ApiError
from app.server.guard import cors_headers, guard
from app.server.records import EngineHandle, ModelsInfo, ServedRecord
from app.server.requests import Options, parse_chat, parse_completion, parse_json
from app.server.shapes import Answer, Shape, StopCutter

RECENT = 20  # requests /health lists


def model_id(folder: str) -> str:
    """What clients name a model: its folder's name (a hub id such as `org/name` stays whole)."""
    path = Path(folder)
    return path.name if path.is_absolute() or folder.startswith((".", "~")) else folder


def engine_refusal(error: EngineError, param: str) -> ApiError:
    """The worker's refusal of a request, as the API's error."""
    match error.kind:
        case ErrorKind.STATE:
            return ApiError(
                503, f"No model is ready: {error.message}.", type="server_error", code="model_not_loaded"
            )
        case ErrorKind.CONTEXT:
            return ApiError(400, error.message, param=param, code="context_length_exceeded")
        case ErrorKind.TEMPLATE:
            return ApiError(
                400, f"The model's chat template failed on these messages: {error.message}", param=param
            )
    return ApiError(500, f"The engine failed: {error.message}", type="server_error")


class Api:
    """The routes and what they share: the count of API requests in the engine, the log."""

    def __init__(
        self,
        config: ServerConfig,
        engine: EngineHandle,
        models_fn: Callable[[], ModelsInfo],
        on_served: Callable[[ServedRecord], None],
    ) -> None:
        self.config, self.engine, self.models_fn, self.on_served = config, engine, models_fn, on_served
        self.active = 0  # API requests waiting in or running on the engine
        self.served = 0
        self.recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=RECENT)
        self.seconds_each = 5.0  # a running estimate of one request's time, for Retry-After
        self._background: set[asyncio.Task[None]] = set()

    # -- the routes ------------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        info = self.models_fn()
        return web.json_response(
            {
                "status": "ok" if info.main else "no_model",
                "model": model_id(info.main) if info.main else None,
                "draft": model_id(info.draft) if info.draft else None,
                "active": self.active,
                "max_queue": self.config.max_queue,
                "served": self.served,
                "recent": list(self.recent),
            }
        )

    async def models(self, request: web.Request) -> web.Response:
        info = self.models_fn()
        data: list[dict[str, Any]] = []
        seen: set[str] = set()

        def add(ident: str, roles: tuple[str, ...], loaded: bool, **extra: Any) -> None:
            if ident in seen:
                return
            seen.add(ident)
            entry = {"id": ident, "object": "model", "created": 0, "owned_by": "specchat"}
            data.append({**entry, "specchat": {"roles": list(roles), "loaded": loaded, **extra}})

        if info.main:
            draft = model_id(info.draft) if info.draft else None
            add(model_id(info.main), ("main",), True, draft=draft)
        if info.draft:
            add(model_id(info.draft), ("draft",), True)
        for model in info.library:
            add(model_id(model.id), model.roles, False)
        return web.json_response({"object": "list", "data": data})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        parsed = parse_chat(
            parse_json(await request.read()), self.config.max_tokens_cap, self.config.sampling
        )
        o = parsed.options
        command = Generate(
            parsed.messages, o.sampling, o.speculation or self.config.speculation, o.max_tokens
        )
        return await self._serve(request, "chat", command, o)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        parsed = parse_completion(
            parse_json(await request.read()), self.config.max_tokens_cap, self.config.sampling
        )
        o = parsed.options
        speculation = o.speculation or self.config.speculation
        command = Generate((), o.sampling, speculation, o.max_tokens, prompt=parsed.prompt)
        return await self._serve(request, "completions", command, o)

    # -- one answer ------------------------------------------------------------------------------

    def _admit(self, options: Options) -> str:
        """The model's id, once the request may enter the engine's queue."""
        info = self.models_fn()
        if info.main is None:
            raise ApiError(
                503,
                "No model is loaded in SpecChat; load a pair first.",
                type="server_error",
                code="model_not_loaded",
            )
        name = model_id(info.main)
        if options.model not in (None, "", name, info.main):
            raise ApiError(
                404,
                f"The model '{options.model}' does not exist here; this server serves '{name}'.",
                param="model",
                type="invalid_request_error",
                code="model_not_found",
            )
        if self.active >= self.config.max_queue:
            wait = max(1, math.ceil(self.seconds_each * self.active))
            raise ApiError(
                429,
                f"The server is busy: {self.active} requests wait or run. Try again in {wait} s.",
                type="rate_limit_error",
                code="queue_full",
                headers={"Retry-After": str(wait)},
            )
        return name

    async def _serve(
        self, request: web.Request, endpoint: str, command: Generate, o: Options
    ) -> web.StreamResponse:
        name = self._admit(o)
        arrived, started = time.time(), time.perf_counter()
        client = request.remote or "?"
        shape = Shape(endpoint == "chat", name)
        param = "messages" if endpoint == "chat" else "prompt"
        speculation = command.speculation
        plain = self.models_fn().plain_tokens_per_second
        self.active += 1
        exchange = Exchange(self.engine, command)
        cutter = StopCutter(o.stop)
        sent: list[str] = []
        stream: web.StreamResponse | None = None

        async def send(payload: dict[str, Any] | str) -> None:
            assert stream is not None
            data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
            await stream.write(f"data: {data}\n\n".encode())

        def log(answer: Answer | None, finish: str, status: int = 200) -> None:
            self._log(arrived, client, endpoint, answer, finish, "".join(sent), status)
            self.seconds_each = 0.7 * self.seconds_each + 0.3 * (time.perf_counter() - started)

        try:
            finished: GenerationFinished | None = None
            async for event in exchange.replies():
                if isinstance(event, EngineError):
                    if event.kind is ErrorKind.NOTICE:
                        continue
                    refusal = engine_refusal(event, param)
                    log(None, "error", refusal.status)
                    if stream is None:
                        raise refusal
                    await send(refusal.body())
                    await send("[DONE]")
                    return stream
                if isinstance(event, GenerationContext) and o.stream and stream is None:
                    stream = web.StreamResponse(
                        headers={
                            "Content-Type": "text/event-stream",
                            "Cache-Control": "no-cache",
                            **cors_headers(request, self.config),
                        }
                    )
                    await stream.prepare(request)
                    if shape.chat:
                        await send(shape.chunk(None, first=True))
                elif isinstance(event, TokenEvent):
                    text = cutter.feed(event.text)
                    if text:
                        sent.append(text)
                        if stream is not None:
                            await send(shape.chunk(text))
                    if cutter.stopped:
                        finished = await exchange.finish()
                        break
                elif isinstance(event, GenerationFinished):
                    finished = event
            if not cutter.stopped:
                rest = cutter.feed(finished.tail if finished else "") + cutter.flush()
                if rest:
                    sent.append(rest)
                    if stream is not None:
                        await send(shape.chunk(rest))
            reason = (
                "length"
                if finished and finished.reason is FinishReason.LENGTH and not cutter.stopped
                else "stop"
            )
            answer = Answer("".join(sent), reason, finished.stats if finished else None, speculation, plain)
            log(
                answer,
                reason
                if not finished or finished.reason is not FinishReason.CANCELLED or cutter.stopped
                else "cancelled",
            )
            if stream is None:
                return web.json_response(shape.whole(answer), dumps=_dumps)
            await send(shape.last_chunk(answer))
            if o.include_usage:
                await send(shape.usage_chunk(answer))
            await send("[DONE]")
            await stream.write_eof()
            return stream
        finally:
            if exchange.ended.is_set():
                self.active -= 1
            else:  # the client went away: stop decoding, and log what was written
                self._spawn(self._abandoned(exchange, arrived, client, endpoint, speculation, plain, sent))

    async def _abandoned(
        self,
        exchange: Exchange,
        arrived: float,
        client: str,
        endpoint: str,
        speculation: Any,
        plain: float | None,
        sent: list[str],
    ) -> None:
        try:
            finished = await exchange.finish()
        finally:
            self.active -= 1
        answer = Answer("".join(sent), "stop", finished.stats if finished else None, speculation, plain)
        self._log(arrived, client, endpoint, answer, "cancelled", answer.text, 499)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _log(
        self,
        arrived: float,
        client: str,
        endpoint: str,
        answer: Answer | None,
        finish: str,
        text: str,
        status: int,
    ) -> None:
        s = answer.stats if answer else None
        record = ServedRecord(
            time=arrived,
            client=client,
            endpoint=endpoint,
            prompt_tokens=s.prompt_tokens if s else 0,
            tokens=s.tokens if s else 0,
            tokens_per_second=s.tokens_per_second if s else 0.0,
            speedup_vs_plain=answer.speedup if answer else None,
            accepted=s.accepted if s else 0,
            proposed=s.proposed if s else 0,
            finish_reason=finish,
            text=text,
            reused_prompt_tokens=s.reused_tokens if s else 0,
            status=status,
        )
        self.served += 1
        self.recent.append(
            {
                "endpoint": endpoint,
                "status": status,
                "finish_reason": finish,
                "prompt_tokens": record.prompt_tokens,
                "tokens": record.tokens,
                "seconds": round(time.time() - arrived, 3),
            }
        )
        try:
            self.on_served(record)
        except Exception:  # the log pane's trouble must not fail an answer already written
            pass


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def build_app(
    config: ServerConfig,
    engine: EngineHandle,
    models_fn: Callable[[], ModelsInfo],
    on_served: Callable[[ServedRecord], None],
    port: Callable[[], int] | None = None,
) -> web.Application:
    """The aiohttp application; `port`: the port clients reach it on, for the Host check (by
    default the configured one)."""
    api = Api(config, engine, models_fn, on_served)
    app = web.Application(
        client_max_size=config.max_body_bytes,
        middlewares=[guard(config, port or (lambda: config.port))],
    )
    app.router.add_get("/health", api.health)
    app.router.add_get("/v1/models", api.models)
    app.router.add_post("/v1/chat/completions", api.chat)
    app.router.add_post("/v1/completions", api.completions)
    return app
