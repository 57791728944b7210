"""The JSON bodies of `/v1/chat/completions` and `/v1/completions`, checked field by field.

Each field of the wrong type or out of range is refused with a 400 that names it, as the OpenAI
API does; fields this server does not know are ignored (clients send many). Nothing here reads a
file or a URL named in a request."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from app.engine.protocol import SamplingParams, SpeculationMode, SpeculationSettings
from app.server.errors import ApiError, bad_param

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
MAX_STOPS = 4
CHAT_MAX_TOKENS = 512  # a chat request that names no max_tokens
COMPLETION_MAX_TOKENS = 16  # the OpenAI API's default for raw completions
GREEDY = SamplingParams()  # temperature 0: what `generate` does unless told otherwise


@dataclass(frozen=True, slots=True)
class Options:
    """What both endpoints share."""

    model: str | None
    max_tokens: int
    sampling: SamplingParams
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool
    speculation: SpeculationSettings | None  # None: the server's own


@dataclass(frozen=True, slots=True)
class ChatRequest:
    messages: tuple[dict[str, str], ...]
    options: Options


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    prompt: str
    options: Options


def parse_json(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(400, f"The request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return body


def _number(body: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_param(name, f"'{name}' must be a number, not {_kind(value)}.")
    if not low <= value <= high:
        raise bad_param(name, f"'{name}' must be between {low:g} and {high:g}; got {value:g}.")
    return float(value)


def _integer(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_param(name, f"'{name}' must be an integer, not {_kind(value)}.")
    return value


def _kind(value: object) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }.get(type(value), "null")


def _options(body: dict[str, Any], default_tokens: int, cap: int, defaults: SamplingParams) -> Options:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad_param("model", f"'model' must be a string, not {_kind(model)}.")
    name = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = _integer(body, name)
    if max_tokens is not None and not 1 <= max_tokens <= cap:
        raise bad_param(name, f"'{name}' must be between 1 and {cap:,}; got {max_tokens:,}.")
    n = _integer(body, "n")
    if n is not None and n != 1:
        raise bad_param("n", "'n' must be 1: this server writes one answer per request.")
    for penalty in ("frequency_penalty", "presence_penalty"):
        if _number(body, penalty, 0.0, -2.0, 2.0) != 0.0:
            raise bad_param(penalty, f"'{penalty}' is not supported by this server; leave it at 0.")
    seed = _integer(body, "seed")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise bad_param("stream", f"'stream' must be a boolean, not {_kind(stream)}.")
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise bad_param("stream_options", "'stream_options' must be an object.")
    include_usage = stream_options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise bad_param("stream_options", "'stream_options.include_usage' must be a boolean.")
    # what the request leaves out comes from the server's defaults (`serve`'s sampling options)
    sampling = dataclasses.replace(
        defaults,
        temperature=_number(body, "temperature", defaults.temperature, 0.0, 2.0),
        top_p=_number(body, "top_p", defaults.top_p, 0.0, 1.0) or 1.0,
        seed=seed if seed is not None else defaults.seed,
    )
    return Options(
        model=model,
        max_tokens=min(max_tokens or default_tokens, cap),
        sampling=sampling,
        stop=_stops(body.get("stop")),
        stream=stream,
        include_usage=include_usage,
        speculation=_speculation(body.get("speculation")),
    )


def _stops(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise bad_param("stop", "'stop' must be a string or an array of strings.")
    if len(stops) > MAX_STOPS:
        raise bad_param("stop", f"'stop' takes at most {MAX_STOPS} strings; got {len(stops)}.")
    return tuple(s for s in stops if s)


def _speculation(value: object) -> SpeculationSettings | None:
    """`"off"`, `"adaptive"`, `"lookup"`, `"fixed"` (k 4), or `{"mode": "fixed", "k": 6}`;
    the app's words (`SpeculationMode.parse`: "plain" still means off)."""
    if value is None:
        return None
    spec = {"mode": value} if isinstance(value, str) else value
    if not isinstance(spec, dict):
        raise bad_param("speculation", "'speculation' must be a string or an object.")
    word, k = spec.get("mode"), spec.get("k", 4)
    try:
        mode = SpeculationMode.parse(word) if isinstance(word, str) else None
    except ValueError:
        mode = None
    if mode is None:
        choices = ", ".join(f"'{m.value}'" for m in SpeculationMode)
        raise bad_param("speculation", f"'speculation' must be one of {choices}.")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 16:
        raise bad_param("speculation", "'speculation.k' must be an integer from 1 to 16.")
    return SpeculationSettings(mode, k=k)


def _content(value: object, where: str) -> str:
    """A message's text: a string, or an array of text parts (anything else is refused)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for part in value:
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise bad_param(where, "Only text content is supported by this server.")
            texts.append(part["text"])
        return "".join(texts)
    raise bad_param(where, f"'{where}' must be a string or an array of text parts, not {_kind(value)}.")


def parse_chat(body: dict[str, Any], cap: int, defaults: SamplingParams = GREEDY) -> ChatRequest:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_param("messages", "'messages' must be a non-empty array of messages.")
    turns = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad_param(where, f"'{where}' must be an object with 'role' and 'content'.")
        role = message.get("role")
        if role not in ROLES:
            raise bad_param(
                f"{where}.role",
                f"'{where}.role' must be one of system, developer, user, assistant; got {role!r}.",
            )
        turns.append({"role": ROLES[role], "content": _content(message.get("content"), f"{where}.content")})
    return ChatRequest(tuple(turns), _options(body, CHAT_MAX_TOKENS, cap, defaults))


def parse_completion(body: dict[str, Any], cap: int, defaults: SamplingParams = GREEDY) -> CompletionRequest:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise bad_param("prompt", "'prompt' must be a string (one prompt per request).")
    if body.get("echo"):
        raise bad_param("echo", "'echo' is not supported by this server.")
    if body.get("logprobs") is not None:
        raise bad_param("logprobs", "'logprobs' is not supported by this server.")
    return CompletionRequest(prompt, _options(body, COMPLETION_MAX_TOKENS, cap, defaults))
