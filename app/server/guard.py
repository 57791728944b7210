"""The safety rules every request meets before a route sees it.

A web page in the user's browser can send simple POSTs to 127.0.0.1 and rebind a name of its
own to it; requiring `application/json` (never a simple request, so the browser asks first, and
no CORS answer is given unless configured) and a `Host` naming this server blocks both. An API
key, where set, is checked in constant time."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from app.server.config import LOOPBACK_NAMES, ServerConfig
from app.server.errors import ApiError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
WILDCARDS = ("0.0.0.0", "::", "")


def host_allowed(host: str | None, config: ServerConfig, port: int) -> bool:
    """Whether a request's Host header names this server: a loopback name or the bound host,
    with the port (none needed on port 80). On a wildcard bind, any IP address of ours is
    reachable, so any address literal with the port passes (names still do not)."""
    if not host:
        return False
    name, _, given = host.rpartition(":")
    if not name or host.endswith("]"):  # no port in the header
        name, given = host, "80"
    if given != str(port):
        return False
    bare = name.strip("[]").lower()
    if bare in LOOPBACK_NAMES or bare == config.host.strip("[]").lower():
        return True
    if config.host in WILDCARDS:
        try:
            ipaddress.ip_address(bare)
        except ValueError:
            return False
        return True
    return False


def cors_headers(request: web.Request, config: ServerConfig) -> dict[str, str]:
    origin = request.headers.get("Origin")
    if origin is None or origin not in config.cors_origins:
        return {}
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
        "Access-Control-Allow-Headers": "Authorization, Content-Type",
        "Vary": "Origin",
    }


def guard(config: ServerConfig, port: Callable[[], int]) -> Middleware:
    """The middleware: Host (403), preflight (CORS), API key (401), content type (415), size
    (413); every refusal and every aiohttp HTTP error as an OpenAI-shaped JSON error."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        cors = cors_headers(request, config)
        try:
            _check(request, config, port())
            if request.method == "OPTIONS":
                if not cors:
                    raise ApiError(403, "Cross-origin requests are not allowed by this server.")
                return web.Response(status=204, headers=cors)
            response = await handler(request)
        except ApiError as exc:
            response = exc.response()
        except web.HTTPException as exc:
            response = _http_error(exc, config)
        if not response.prepared:
            response.headers.update(cors)
        return response

    return middleware


def _check(request: web.Request, config: ServerConfig, port: int) -> None:
    if not host_allowed(request.headers.get("Host"), config, port):
        raise ApiError(
            403,
            "The Host header does not name this server; use the address the server printed.",
            type="permission_error",
            code="wrong_host",
        )
    if request.method == "OPTIONS":
        return
    if config.api_key:
        given = request.headers.get("Authorization", "")
        scheme, _, key = given.partition(" ")
        if scheme.lower() != "bearer" or not key:
            raise ApiError(
                401,
                "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.",
                type="authentication_error",
                code="missing_api_key",
            )
        if not hmac.compare_digest(key.strip().encode(), config.api_key.encode()):
            raise ApiError(
                401, "Incorrect API key provided.", type="authentication_error", code="invalid_api_key"
            )
    if request.method == "POST":
        if request.content_type != "application/json":
            raise ApiError(
                415,
                f"Requests must be sent as 'Content-Type: application/json', not {request.content_type!r}.",
                code="unsupported_media_type",
            )
        length = request.content_length
        if length is not None and length > config.max_body_bytes:
            raise _too_large(config)


def _too_large(config: ServerConfig) -> ApiError:
    return ApiError(
        413,
        f"The request body is over this server's limit of {config.max_body_bytes:,} bytes.",
        code="request_too_large",
    )


def _http_error(exc: web.HTTPException, config: ServerConfig) -> web.Response:
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return _too_large(config).response()
    words = {404: "No such endpoint on this server.", 405: "That method is not allowed here."}
    message = words.get(exc.status, exc.reason)
    return ApiError(exc.status, message, type="invalid_request_error").response()
