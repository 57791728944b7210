"""The renderer child (see renderer.py): renders chat templates sent as JSON lines on stdin.

Run as `python -m app.engine.decoding.templates.render_child SETTINGS`. It limits its own address space
first where asked, says it is ready, then answers each request line with one JSON line: the
text, or the error and whether a limit tripped. End of input ends it, so a parent that dies,
however it dies, leaves no child behind once the render in progress stops at its deadline.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any, BinaryIO


def _limit_address_space(limit: int) -> None:
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _answer(line: bytes) -> dict[str, Any]:
    from app.engine.decoding.templates.chat import TemplateError, TemplateLimitError, render_chat

    try:
        request = json.loads(line)
        return {
            "text": render_chat(
                request["template"],
                request["messages"],
                add_generation_prompt=bool(request["add_generation_prompt"]),
                special=request["special"],
                timeout=float(request["timeout"]),
                **request["extra"],
            )
        }
    except TemplateError as error:
        return {"error": str(error), "limit": isinstance(error, TemplateLimitError)}
    except MemoryError:
        return {"error": "out of memory", "limit": True}
    except Exception as error:  # a malformed request: answered, so the parent is not left waiting
        return {"error": f"the template renderer failed: {type(error).__name__}: {error}", "limit": False}


def _write(out: BinaryIO, reply: dict[str, Any]) -> None:
    try:
        data = json.dumps(reply, ensure_ascii=True).encode("ascii")
    except MemoryError:  # the text fit but its JSON copy did not
        data = json.dumps({"error": "out of memory", "limit": True}).encode("ascii")
    out.write(data + b"\n")
    out.flush()


def main(argv: list[str]) -> int:
    # No BLAS is loaded here (app.engine.blas): rendering never imports MLX.
    # Ctrl-C in a terminal reaches the whole process group; the parent decides when this ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    settings = json.loads(argv[0]) if argv else {}
    if settings.get("address_limit"):
        _limit_address_space(int(settings["address_limit"]))
    import app.engine.decoding.templates.chat  # noqa: F401  # loaded before "ready", not in a render's time

    out = sys.stdout.buffer
    _write(out, {"ready": True})
    for line in sys.stdin.buffer:
        _write(out, _answer(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
