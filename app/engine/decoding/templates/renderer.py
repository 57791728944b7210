"""Chat templates from model files render in a child process with real time and memory limits.

The in-process sandbox (sandbox.py) checks sizes where Jinja calls back into Python, but values
that become text inside C code (`str()` of a list of large strings, `tojson`, `string`) are built
in one call it never sees. So each template gets one long-lived child (spawning one per render
would cost a chat turn more than the render): it runs the same sandbox under an address-space
limit where the OS enforces one (Linux), while the parent watches its resident memory everywhere
(macOS ignores the address-space limit) and its wall-clock time, and ends it on either. Every
limit reads the same to the user: LIMIT_MESSAGE. A killed child is replaced at the next render.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from app.engine.decoding.templates.sandbox import TemplateError, TemplateLimitError

LIMIT_MESSAGE = "the model's chat template took too long / used too much memory — SpecChat stopped it"
MEMORY_LIMIT = 1 << 30  # far above any real template's needs, even at the 16 MB output cap
GRACE = 1.0  # the child's own deadline trips first; the parent's catches what its tracer cannot see
START_LIMIT = 60.0  # a cold start on a busy machine imports Python and Jinja slowly
ADDRESS_LIMIT_ENFORCED = sys.platform.startswith("linux")
_POLL = 0.05  # how often a render that has not answered yet has its child's memory read
_KEEP = 4  # children kept alive at once; a pair renders one template, tools may touch a few

CHILD_MODULE = "app.engine.decoding.templates.render_child"


def resident_bytes(pid: int) -> int | None:
    """The child's resident memory, or None when it cannot be read (it has just exited)."""
    if sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{pid}/statm") as statm:
                return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return None
    try:  # macOS and the rest: ps is always there, and polled only while a render is slow
        out = subprocess.run(["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, text=True, timeout=5)
        return int(out.stdout.strip()) * 1024
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


class TemplateRenderer:
    """One renderer child: `render` sends it a template and its inputs and waits for the text.

    `address_limit` None means: wherever the OS enforces one. `command` replaces the child's
    command line (tests use it to stand in a child that never answers).
    """

    def __init__(
        self,
        *,
        memory_limit: int | None = None,
        address_limit: bool | None = None,
        grace: float | None = None,
        command: list[str] | None = None,
    ) -> None:
        self.memory_limit = MEMORY_LIMIT if memory_limit is None else memory_limit
        self._address_limit = ADDRESS_LIMIT_ENFORCED if address_limit is None else address_limit
        self._grace = GRACE if grace is None else grace
        self._command = command or [sys.executable, "-m", CHILD_MODULE]
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.stopped = 0  # children ended for a limit, for tests and diagnostics

    @property
    def pid(self) -> int | None:
        """The live child's process id, if one runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def render(
        self,
        template: str,
        messages: list[Any],
        *,
        add_generation_prompt: bool = True,
        special: dict[str, str] | None = None,
        timeout: float = 2.0,
        **extra: Any,
    ) -> str:
        """The rendered text; a TemplateError says why not, LIMIT_MESSAGE for any limit."""
        request = {
            "template": template,
            "messages": messages,
            "add_generation_prompt": add_generation_prompt,
            "special": special or {},
            "timeout": timeout,
            "extra": extra,
        }
        try:
            line = json.dumps(request, ensure_ascii=True).encode("ascii") + b"\n"
        except (TypeError, ValueError) as error:
            raise TemplateError(f"the chat template's inputs are not plain data: {error}") from None
        with self._lock:
            proc = self._send(line)
            reply = self._read_reply(proc, timeout + self._grace)
        if "text" in reply:
            return str(reply["text"])
        if reply.get("limit"):
            raise TemplateLimitError(LIMIT_MESSAGE)
        raise TemplateError(str(reply.get("error", "the chat template failed")))

    def close(self) -> None:
        """End the child. A render in flight on another thread has its child killed instead;
        that thread reaps it when it sees the pipe close."""
        if self._lock.acquire(timeout=0.5):
            try:
                self._end(gently=True)
            finally:
                self._lock.release()
        elif (proc := self._proc) is not None:
            proc.kill()

    def _send(self, line: bytes) -> subprocess.Popen[bytes]:
        for attempt in range(2):
            proc = self._started()
            assert proc.stdin is not None
            try:
                proc.stdin.write(line)
                proc.stdin.flush()
                return proc
            except OSError:  # it died between renders (killed from outside): start another
                self._end()
                if attempt:
                    raise TemplateError("SpecChat could not reach its template renderer") from None
        raise AssertionError("unreachable")

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._end()
        settings = {"address_limit": self.memory_limit if self._address_limit else None}
        env = dict(os.environ)
        if not getattr(sys, "frozen", False):
            # the child imports this package from where the parent did, whatever its working folder
            root = str(Path(__file__).resolve().parents[4])
            env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(
                [*self._command, json.dumps(settings)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
            ready = self._read_reply(self._proc, START_LIMIT)
        except (OSError, TemplateError) as error:
            self._end()
            raise TemplateError(f"SpecChat could not start its template renderer: {error}") from None
        if not ready.get("ready"):
            self._end()
            raise TemplateError("SpecChat could not start its template renderer")
        return self._proc

    def _read_reply(self, proc: subprocess.Popen[bytes], limit: float) -> dict[str, Any]:
        """One JSON line from the child, ending it if it runs past `limit` seconds, holds more
        than the memory limit or dies first."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        started = time.monotonic()
        deadline, next_check = started + limit, started + _POLL
        buffer = bytearray()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                now = time.monotonic()
                if now > deadline:
                    return self._stop()
                if now >= next_check:
                    resident = resident_bytes(proc.pid)
                    if resident is not None and resident > self.memory_limit:
                        return self._stop()
                    next_check = now + _POLL
                if not selector.select(min(deadline - now, next_check - now, _POLL)):
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:  # it died mid-render: the address-space limit or the system's
                    return self._stop()
                buffer += chunk
                end = buffer.find(b"\n", len(buffer) - len(chunk))
                if end >= 0:
                    try:
                        reply = json.loads(bytes(buffer[:end]))
                    except ValueError:  # not our child's words: start afresh next time
                        self._end()
                        raise TemplateError("SpecChat's template renderer answered garbage") from None
                    return reply if isinstance(reply, dict) else {}

    def _stop(self) -> dict[str, Any]:
        self.stopped += 1
        self._end()
        raise TemplateLimitError(LIMIT_MESSAGE)

    def _end(self, *, gently: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if gently and proc.stdin is not None:
            try:  # end of input is the child's signal to exit
                proc.stdin.close()
                proc.wait(timeout=1.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


_RENDERERS: dict[str, TemplateRenderer] = {}  # by template source, most recently used last
_REGISTRY_LOCK = threading.Lock()


def renderer_for(template: str) -> TemplateRenderer:
    """The long-lived renderer of this template, started at its first render."""
    with _REGISTRY_LOCK:
        renderer = _RENDERERS.pop(template, None) or TemplateRenderer()
        _RENDERERS[template] = renderer
        evicted = [_RENDERERS.pop(key) for key in list(_RENDERERS)[:-_KEEP]]
    for old in evicted:
        old.close()
    return renderer


def close_renderers() -> None:
    """End every renderer child: when a pair is unloaded, and when the app exits."""
    with _REGISTRY_LOCK:
        renderers = list(_RENDERERS.values())
        _RENDERERS.clear()
    for renderer in renderers:
        renderer.close()


def live_renderer_pids() -> list[int]:
    """Process ids of the renderer children now running."""
    with _REGISTRY_LOCK:
        renderers = list(_RENDERERS.values())
    return [pid for r in renderers if (pid := r.pid) is not None]


atexit.register(close_renderers)
