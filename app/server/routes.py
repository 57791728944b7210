"""The endpoints: `/health`, `/v1/models`, `/v1/chat/completions`, `/v1/completions`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from app.server.config import ServerConfig
from app.server.records import EngineHandle, ModelsInfo, ServedRecord


def model_id(folder: str) -> str:
    """What clients name a model: its folder's name (a hub id stays whole)."""
    path = Path(folder)
    return path.name if path.is_absolute() or folder.startswith(".") else folder


def build_app(
    config: ServerConfig,
    engine: EngineHandle,
    models_fn: Callable[[], ModelsInfo],
    on_served: Callable[[ServedRecord], None],
) -> web.Application:
    app = web.Application(client_max_size=config.max_body_bytes)

    async def health(request: web.Request) -> web.Response:
        info = models_fn()
        return web.json_response({"status": "ok" if info.main else "no_model"})

    app.router.add_get("/health", health)
    return app
