"""Errors shaped like the OpenAI API's, so clients show their message instead of a parse failure."""

from __future__ import annotations

from typing import Any

from aiohttp import web


class ApiError(Exception):
    """A request refused with `status`; `param` names the field at fault where there is one."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        type: str = "invalid_request_error",
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param
        self.type, self.code, self.headers = type, code, headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> web.Response:
        return web.json_response(self.body(), status=self.status, headers=self.headers)


def bad_param(param: str, message: str) -> ApiError:
    return ApiError(400, message, param=param)
