"""Plain HTTP for the tests, with the stdlib: what any program sends, headers included."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> Reply:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.putrequest(method, path, skip_host="Host" in (headers or {}))
        sent = dict(headers or {})
        if body is not None:
            sent.setdefault("Content-Length", str(len(body)))
        for name, value in sent.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return Reply(response.status, dict(response.getheaders()), response.read())
    finally:
        connection.close()
