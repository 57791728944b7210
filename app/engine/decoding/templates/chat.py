"""Chat templates are untrusted code from model folders, so they render in a guarded sandbox.

Jinja's `ImmutableSandboxedEnvironment` blocks attribute escapes and mutation; on top of it we
bound what a template can cost: a wall-clock deadline enforced by a trace function (loops are
Python code the tracer sees), a size cap on `*`, `**`, `+` and `%` results (one C call such as
`'x' * 10**10` never returns to the tracer), padding filters/methods, and the output length.
The environment mirrors what transformers gives Hub templates, without calling transformers.
`format_chat`, the one way a model file's template is rendered, runs this sandbox in a child
process with real memory and time limits (renderer.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Generator
from typing import Any, cast

import jinja2

from app.engine.decoding.templates.renderer import renderer_for
from app.engine.decoding.templates.sandbox import (
    MAX_TEXT,
    TemplateError,
    TemplateLimitError,
    TooLarge,
    compile_template,
)
from app.engine.decoding.text.clean import clean_text

__all__ = ["TemplateError", "TemplateLimitError", "format_chat", "plain_format", "render_chat"]

PLAIN_ROLES = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


class _Deadline(BaseException):
    """Raised by the tracer; a BaseException so `except Exception` in helpers cannot hide it."""


def _plain(value: Any) -> Any:
    """Copy inputs to plain JSON-like types so the template only sees objects the sandbox knows."""
    if value is None or isinstance(value, bool):
        return value
    for kind in (str, int, float):  # subclasses could carry methods; keep the base value only
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def render_chat(
    template: str,
    messages: list[dict[str, Any]],
    *,
    add_generation_prompt: bool = True,
    special: dict[str, str] | None = None,
    timeout: float = 2.0,
    **extra: Any,
) -> str:
    """Render a chat template; any failure, overrun or blow-up becomes a TemplateError."""
    compiled = compile_template(template)
    variables = {k: _plain(v) for k, v in extra.items()}
    variables.update({k: v for k, v in (special or {}).items()})
    variables["messages"] = _plain(messages)
    variables["add_generation_prompt"] = add_generation_prompt
    deadline = time.monotonic() + timeout

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise _Deadline
        return tracer

    previous = sys.gettrace()
    # jinja2 annotates it an iterator; it is a generator, closed below
    rendering = cast("Generator[str, None, None]", compiled.generate(**variables))
    sys.settrace(tracer)
    try:
        chunks: list[str] = []
        size = 0
        for chunk in rendering:
            size += len(chunk)
            if size > MAX_TEXT:
                raise TooLarge("the template output is too large")
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise _Deadline
        return "".join(chunks)
    except _Deadline:
        raise TemplateLimitError(f"the chat template ran longer than {timeout:g} s and was stopped") from None
    except jinja2.exceptions.SecurityError as error:
        kind = TemplateLimitError if isinstance(error, TooLarge) else TemplateError
        raise kind(f"the chat template did something unsafe: {error}") from None
    except jinja2.exceptions.TemplateError as error:
        raise TemplateError(f"the chat template raised an error: {error}") from None
    except (MemoryError, RecursionError, OverflowError) as error:
        raise TemplateLimitError(
            f"the chat template ran out of resources: {type(error).__name__}: {error}"
        ) from None
    except Exception as error:  # anything else a template can trigger: TypeError, KeyError...
        raise TemplateError(f"the chat template failed: {type(error).__name__}: {error}") from None
    finally:
        sys.settrace(previous)
        # closed here, with the tracer gone: left to the garbage collector, a stopped
        # rendering's close ran under the tracer, which raised again where nothing could catch it
        rendering.close()


def _hf_tokenizer(tokenizer: Any) -> Any:
    """The Hugging Face tokenizer inside an mlx-lm TokenizerWrapper, or the tokenizer itself."""
    from mlx_lm.tokenizer_utils import TokenizerWrapper

    # Only unwrap the mlx-lm wrapper: HF tokenizers keep their Rust tokenizer in `_tokenizer`.
    return tokenizer._tokenizer if isinstance(tokenizer, TokenizerWrapper) else tokenizer


def _template_of(hf: Any) -> str | None:
    template = getattr(hf, "chat_template", None)
    if isinstance(template, dict):
        template = template.get("default") or next(iter(template.values()), None)
    return template if isinstance(template, str) and template.strip() else None


def _special_tokens(hf: Any) -> dict[str, str]:
    names = ("bos_token", "eos_token", "pad_token", "unk_token")
    return {n: str(v) for n in names if (v := getattr(hf, n, None)) is not None}


def _content_text(content: Any) -> str:
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


# Fence a message's content while the template renders, so the text between them is known to be
# the user's; private-use characters, which no template or tokenizer gives a meaning
FENCE_OPEN, FENCE_CLOSE = "\ue000", "\ue001"
MOVED_FENCE = "a message holds characters the chat template cannot place (U+E000, U+E001)"


def _marked_contents(hf: Any, messages: list[dict[str, Any]]) -> bool:
    """Whether some message's text holds a special token's text (a role marker, say), which
    must reach the model as the characters typed, never as the marker itself."""
    added = getattr(hf, "added_tokens_decoder", {}).values()
    specials = [str(t.content) for t in added if getattr(t, "special", False) and str(t.content)]
    texts = [_content_text(m.get("content")) for m in messages]
    return any(token in text for text in texts for token in specials)


def _fenced(content: Any) -> Any:
    if isinstance(content, list):
        return [
            {**p, "text": FENCE_OPEN + str(p.get("text", "")) + FENCE_CLOSE}
            if isinstance(p, dict) and "text" in p
            else p
            for p in content
        ]
    return FENCE_OPEN + _content_text(content) + FENCE_CLOSE


def _encode_rendered(hf: Any, text: str, fenced: bool) -> list[int]:
    """The rendered prompt's ids. Fenced contents are encoded with special tokens left as text;
    the template's own text around them, with its markers, as usual."""
    if not fenced:
        return list(hf.encode(text, add_special_tokens=False))
    pieces = text.split(FENCE_OPEN)
    ids = list(hf.encode(pieces[0], add_special_tokens=False)) if pieces[0] else []
    for piece in pieces[1:]:
        if piece.count(FENCE_CLOSE) != 1:  # the template or the text moved a fence: never guess
            raise TemplateError(MOVED_FENCE)
        content, after = piece.split(FENCE_CLOSE)
        if content:
            ids += hf.encode(content, add_special_tokens=False, split_special_tokens=True)
        if after:
            ids += hf.encode(after, add_special_tokens=False)
    if FENCE_CLOSE in pieces[0]:
        raise TemplateError(MOVED_FENCE)
    return ids


def plain_format(
    messages: list[dict[str, Any]], *, add_generation_prompt: bool = True, bos: str | None = None
) -> str:
    """The fallback for tokenizers without a template: `Role: content` lines, then `Assistant:`.

    e.g. [{"role": "user", "content": "Hi"}] -> "User: Hi\\nAssistant:" (bos first when defined).
    """
    lines = [
        f"{PLAIN_ROLES.get(m.get('role', ''), str(m.get('role', '')).capitalize())}: {_content_text(m.get('content'))}"
        for m in messages
    ]
    if add_generation_prompt:
        lines.append("Assistant:")
    return (bos or "") + "\n".join(lines)


def format_chat(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    *,
    add_generation_prompt: bool = True,
    timeout: float = 2.0,
) -> list[int]:
    """Render the tokenizer's chat template (or the plain fallback) and encode it to ids; the text
    is cleaned first, so a lone surrogate in any message cannot fail the answer."""
    hf = _hf_tokenizer(tokenizer)
    special = _special_tokens(hf)
    template = _template_of(hf)
    fenced = _marked_contents(hf, messages)
    if fenced:
        messages = [{**m, "content": _fenced(m.get("content"))} for m in messages]
    if template is None:
        text = plain_format(
            messages, add_generation_prompt=add_generation_prompt, bos=special.get("bos_token")
        )
    else:
        # Model files are untrusted: their template renders in a child with real memory and time
        # limits, since values Jinja turns into text in C code escape the sandbox's size checks.
        text = renderer_for(template).render(
            template,
            _plain(messages),
            add_generation_prompt=add_generation_prompt,
            special=special,
            timeout=timeout,
        )
    ids = _encode_rendered(hf, clean_text(text), fenced)
    if not ids:
        # Every caller (chat, bench, agreement, replay) would otherwise fail deep in prefill.
        where = getattr(hf, "name_or_path", "") or "the model"
        raise TemplateError(f"{where}: the chat template renders an empty prompt")
    return ids
