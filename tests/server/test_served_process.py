"""A real `python -m app serve` process on the toy pair, driven by the official `openai` client
and by plain HTTP where the client would hide what a user's program sees."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import openai
import pytest

from tests.server.conftest import ROOT, Served, cli_env
from tests.server.plain_http import Reply, request

FIXED = {"speculation": {"mode": "fixed", "k": 4}}  # what `generate` decodes with, given a draft


def _client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url, api_key="unused", max_retries=0, timeout=60)


def _generate(served: Served, prompt: str, max_tokens: int) -> str:
    toy = served.toy
    result = subprocess.run(
        [sys.executable, "-m", "app", "generate", "--main", str(toy.main), "--draft", str(toy.draft)]
        + ["--max-tokens", str(max_tokens), "--color", "never", prompt],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.removesuffix("\n")  # generate ends the answer with a newline


def _health(served: Served) -> dict:
    return request(served.port, "GET", "/health").json()


def test_chat_streamed_and_whole_equal_generate(served: Served) -> None:
    expected = _generate(served, "Hello", 24)
    client = _client(served)
    messages = [{"role": "user", "content": "Hello"}]
    whole = client.chat.completions.create(
        model="main", messages=messages, temperature=0, max_tokens=24, extra_body=FIXED
    )
    assert whole.choices[0].message.content == expected
    assert whole.choices[0].finish_reason == "length"
    assert whole.usage is not None and whole.usage.completion_tokens == 24
    figures = whole.model_extra["specchat"]
    assert figures["speculation"] == "fixed", "the answer's figures name the speculation mode used"
    assert figures["proposed"] > 0, "fixed speculation proposed drafted tokens"

    pieces: list[str] = []
    finish = None
    for chunk in client.chat.completions.create(
        model="main", messages=messages, temperature=0, max_tokens=24, stream=True, extra_body=FIXED
    ):
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
    assert "".join(pieces) == expected
    assert finish == "length"


def test_raw_completion_and_stop_string(served: Served) -> None:
    client = _client(served)
    answer = client.completions.create(model="main", prompt="def add(a, b):", temperature=0, max_tokens=12)
    assert answer.choices[0].text
    assert answer.usage is not None and answer.usage.completion_tokens == 12
    full = client.chat.completions.create(
        model="main", messages=[{"role": "user", "content": "Hello"}], temperature=0, max_tokens=24
    )
    text = full.choices[0].message.content or ""
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    cut = client.chat.completions.create(
        model="main",
        messages=[{"role": "user", "content": "Hello"}],
        temperature=0,
        max_tokens=24,
        stop=[stop],
    )
    assert cut.choices[0].message.content == text[: text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_models_lists_the_loaded_pair(served: Served) -> None:
    listed = {m.id: m for m in _client(served).models.list()}
    assert set(listed) >= {"main", "draft"}
    assert listed["main"].model_extra["specchat"] == {"roles": ["main"], "loaded": True, "draft": "draft"}


def test_two_clients_are_served_in_order(served: Served) -> None:
    client = _client(served)
    times: dict[str, list[float]] = {"a": [], "b": []}
    a_started = threading.Event()

    def ask(name: str) -> None:
        for chunk in client.chat.completions.create(
            model="main",
            messages=[{"role": "user", "content": f"Tell me about {name}"}],
            temperature=0,
            max_tokens=48,
            stream=True,
        ):
            if chunk.choices and chunk.choices[0].delta.content:
                times[name].append(time.perf_counter())
                a_started.set()
        times[name].append(time.perf_counter())

    first = threading.Thread(target=ask, args=("a",))
    first.start()
    assert a_started.wait(30)
    second = threading.Thread(target=ask, args=("b",))
    second.start()
    first.join(60)
    second.join(60)
    assert times["a"] and times["b"]
    # b's first words come only once a's answer is complete (a little slack for the two sockets)
    assert times["b"][0] >= times["a"][-1] - 0.05


def test_a_client_that_leaves_mid_stream_stops_decoding(served: Served) -> None:
    body = {"model": "main", "messages": [{"role": "user", "content": "Go on forever"}], "temperature": 0}
    body |= {"max_tokens": 4000, "stream": True, "speculation": "off"}
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200
    seen = [response.readline() for _ in range(6)]
    assert any(b'"content"' in line for line in seen)
    connection.sock.shutdown(socket.SHUT_RDWR)  # the client goes away mid-answer
    connection.close()
    left = time.perf_counter()
    while time.perf_counter() - left < 10:
        health = _health(served)
        if (
            health["active"] == 0
            and health["recent"]
            and health["recent"][-1]["finish_reason"] == "cancelled"
        ):
            break
        time.sleep(0.05)
    record = _health(served)["recent"][-1]
    assert record["finish_reason"] == "cancelled", record
    assert record["tokens"] < 4000
    # the abandoned answer is over (cancelled above), so the next request is answered, not queued
    reply = _client(served).chat.completions.create(
        model="main", messages=[{"role": "user", "content": "Hi"}], temperature=0, max_tokens=4
    )
    assert reply.choices[0].finish_reason == "length", "the next request is answered in full"


def test_a_second_turn_reuses_the_first_turns_caches(served: Served) -> None:
    client = _client(served)
    first = [{"role": "user", "content": "Name a colour"}]
    answer = client.chat.completions.create(model="main", messages=first, temperature=0, max_tokens=8)
    second = first + [
        {"role": "assistant", "content": answer.choices[0].message.content or ""},
        {"role": "user", "content": "And another"},
    ]
    again = client.chat.completions.create(model="main", messages=second, temperature=0, max_tokens=8)
    assert again.model_extra["specchat"]["reused_prompt_tokens"] > 0


def _post(served: Served, content: bytes, **headers: str) -> Reply:
    headers = {"Content-Type": "application/json", **headers}
    return request(served.port, "POST", "/v1/chat/completions", content, headers)


def _chat_body(**fields: object) -> bytes:
    body = {"model": "main", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4} | fields
    return json.dumps(body).encode()


def test_bad_requests_get_their_status_and_words(served: Served) -> None:
    bad_json = _post(served, b'{"model": "main", "messages": [')
    assert bad_json.status == 400, "a body that is not JSON is a 400"
    assert "not valid JSON" in bad_json.json()["error"]["message"], (
        "the error says the body is not valid JSON"
    )

    wrong_type = _post(served, _chat_body(max_tokens="ten")).json()["error"]
    assert wrong_type["param"] == "max_tokens", "the error names the field with the wrong type"
    assert "integer" in wrong_type["message"], "the error says an integer is needed"

    plain_text = _post(served, _chat_body(), **{"Content-Type": "text/plain"})
    assert plain_text.status == 415, "a body that is not JSON by its type is a 415"
    assert "application/json" in plain_text.json()["error"]["message"], (
        "the error says the body must be application/json"
    )

    other_host = _post(served, _chat_body(), Host=f"attacker.example:{served.port}")
    assert other_host.status == 403, "a request for another host is refused with 403"
    assert "Host" in other_host.json()["error"]["message"], "the error names the Host header"

    huge = _post(served, _chat_body(user="x" * (5 * 1024 * 1024)))
    assert huge.status == 413, "a body past the size limit is a 413"
    assert "limit" in huge.json()["error"]["message"], "the error mentions the limit"

    with pytest.raises(openai.NotFoundError) as unknown:
        _client(served).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    assert "gpt-4o" in str(unknown.value)

    with pytest.raises(openai.BadRequestError) as too_long:
        _client(served).chat.completions.create(
            model="main", messages=[{"role": "user", "content": "word " * 40_000}], max_tokens=4
        )
    assert "32,768" in str(too_long.value)  # the toy main's context, with the prompt's length


def test_curl_from_a_shell_script(served: Served) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    script = Path(__file__).with_name("curl_chat.sh")
    result = subprocess.run(["sh", str(script), served.url], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["content"]
    assert answer["usage"]["completion_tokens"] == 8


def test_the_readme_example_runs_against_the_server(served: Served) -> None:
    """The README's `openai` example, as a user copies it, with only the port changed."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("    from openai import OpenAI")
    block = readme[start : readme.index("\n\n", readme.index("print(", start))]
    code = textwrap.dedent(block).replace("127.0.0.1:8080", f"127.0.0.1:{served.port}")
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=cli_env(), cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "the example printed no answer"
