"""`ServerRunner` in this process: the refusals that need no model, over a real worker with
nothing loaded, and the queue's limit over the devtools' fake engine (a slow scripted answer)."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator

import pytest

from app.devtools.fake_engine import FakeEngine
from app.engine.worker import EngineWorker
from app.server.config import ServerConfig
from app.server.guard import host_allowed
from app.server.records import ModelsInfo, ServedRecord
from app.server.runner import ServerRunner, ServerStartError
from tests.server.plain_http import request

CHAT = json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}).encode()
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def idle_worker() -> Iterator[EngineWorker]:
    worker = EngineWorker(lambda message: None)
    worker.start()
    yield worker
    worker.shutdown()


def _serve(worker: object, models: ModelsInfo, **config: object) -> ServerRunner:
    runner = ServerRunner(ServerConfig(port=0, **config), worker, lambda: models)  # type: ignore[arg-type]
    runner.start()
    return runner


def test_no_model_loaded_is_503(idle_worker: EngineWorker) -> None:
    runner = _serve(idle_worker, ModelsInfo(None))
    try:
        assert runner.address is not None
        port = runner.address[1]
        refused = request(port, "POST", "/v1/chat/completions", CHAT, JSON)
        assert refused.status == 503, "with no pair loaded the server answers 503 (try later)"
        assert "No model is loaded" in refused.json()["error"]["message"], "the error says no model is loaded"
        assert request(port, "GET", "/health").json()["status"] == "no_model"
    finally:
        runner.stop()
    # the window says a pair is loaded, but the worker has none (a load failed): the worker's words
    runner = _serve(idle_worker, ModelsInfo("/models/main"))
    try:
        assert runner.address is not None
        refused = request(runner.address[1], "POST", "/v1/chat/completions", CHAT, JSON)
        assert refused.status == 503, "a worker with no pair makes the server answer 503"
        assert "no model is loaded" in refused.json()["error"]["message"], (
            "the error gives the worker's own words"
        )
    finally:
        runner.stop()


def test_an_api_key_is_required_when_set(idle_worker: EngineWorker) -> None:
    runner = _serve(idle_worker, ModelsInfo(None), api_key="s3cret")
    try:
        assert runner.address is not None
        port = runner.address[1]
        missing = request(port, "POST", "/v1/chat/completions", CHAT, JSON)
        assert missing.status == 401, "a request without the key is a 401"
        assert "API key" in missing.json()["error"]["message"], "the error says an API key is needed"
        wrong = request(port, "GET", "/v1/models", headers={"Authorization": "Bearer nope"})
        assert wrong.status == 401, "a wrong key is a 401"
        assert wrong.json()["error"]["code"] == "invalid_api_key", "the error code says the key is invalid"
        right = request(
            port, "POST", "/v1/chat/completions", CHAT, {**JSON, "Authorization": "Bearer s3cret"}
        )
        assert right.status == 503  # past the key: nothing is loaded
    finally:
        runner.stop()


def test_a_full_queue_is_429_with_retry_after() -> None:
    records: list[ServedRecord] = []
    engine = FakeEngine(lambda message: None, rate=40.0)
    engine.start()
    runner = ServerRunner(
        ServerConfig(port=0, max_queue=1), engine, lambda: ModelsInfo("main"), records.append
    )
    runner.start()
    try:
        assert runner.address is not None
        port = runner.address[1]
        body = json.dumps(
            {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 400, "stream": True}
        )
        busy = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        busy.request("POST", "/v1/chat/completions", body, JSON)
        streaming = busy.getresponse()
        assert streaming.status == 200
        streaming.readline()
        refused = request(port, "POST", "/v1/chat/completions", CHAT, JSON)
        assert refused.status == 429
        assert int(refused.headers["Retry-After"]) >= 1
        assert "busy" in refused.json()["error"]["message"]
        assert busy.sock is not None
        busy.sock.shutdown(socket.SHUT_RDWR)
        busy.close()
    finally:
        runner.stop()
        engine.shutdown()


def test_a_non_loopback_address_needs_a_key(idle_worker: EngineWorker) -> None:
    runner = ServerRunner(ServerConfig(host="0.0.0.0", port=0), idle_worker, lambda: ModelsInfo(None))
    with pytest.raises(ServerStartError, match="without an API key"):
        runner.start()
    assert not runner.running


def test_a_port_in_use_is_said_in_words(idle_worker: EngineWorker) -> None:
    first = _serve(idle_worker, ModelsInfo(None))
    try:
        assert first.address is not None
        second = ServerRunner(ServerConfig(port=first.address[1]), idle_worker, lambda: ModelsInfo(None))
        with pytest.raises(ServerStartError, match="in use"):
            second.start()
    finally:
        first.stop()


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8080", True),
        ("localhost:8080", True),
        ("[::1]:8080", True),
        ("127.0.0.1:9999", False),
        ("attacker.example:8080", False),  # a rebound name
        ("", False),
        (None, False),
    ],
)
def test_the_host_header_must_name_this_server(host: str | None, allowed: bool) -> None:
    assert host_allowed(host, ServerConfig(port=8080), 8080) is allowed
