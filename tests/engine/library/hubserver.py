"""A local stand-in for the Hugging Face hub: the endpoints huggingface_hub calls, over real HTTP.

Serves repo info, the recursive tree listing and `resolve` URLs (HEAD and GET, ETag,
X-Repo-Commit, Content-Length, Range). Faults per file: "truncate_once" sends half the body on
the first GET and closes the connection; "truncate_then_503" does that and then answers every
later GET with 503; "truncate_then_whole" does that and then ignores Range, sending the whole body; "flip" serves the body with its last byte changed; "endless" sends the body and then more
bytes until the client hangs up, with no length in the headers; "oversized" announces and sends
`overflow` bytes more than the body. Neither sends more than `cap` bytes in all. A GET of a file
in `gates` waits for that event. The tree listing carries git blob ids and, for .safetensors, LFS SHA-256s
as the hub's does. The server shuts itself down after `lifetime` seconds at the latest.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HubState:
    repos: dict[str, dict[str, bytes]]
    faults: dict[str, str] = field(default_factory=dict)  # file name -> fault
    log: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, Range
    gets: dict[str, int] = field(default_factory=dict)
    sent: dict[str, int] = field(default_factory=dict)  # file name -> body bytes written
    gates: dict[str, threading.Event] = field(default_factory=dict)  # a GET of the file waits for it
    cap: int = 64 << 20  # the most an "endless" or "oversized" answer sends
    overflow: int = 8 << 20  # how far an "oversized" answer goes past the body


def _entry(name: str, body: bytes) -> dict[str, object]:
    """A tree entry as the hub lists it: the git blob id, and for weights the LFS SHA-256."""
    entry: dict[str, object] = {"type": "file", "path": name, "size": len(body)}
    if name.endswith(".safetensors"):
        sha256 = hashlib.sha256(body).hexdigest()
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\n"
        entry["oid"] = hashlib.sha1(pointer.encode()).hexdigest()
        entry["lfs"] = {"oid": sha256, "size": len(body), "pointerSize": len(pointer)}
    else:
        entry["oid"] = hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()
    return entry


def _handler(state: HubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _json(self, data: object) -> None:
            body = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _route(self) -> None:
            path = unquote(urlparse(self.path).path)
            state.log.append((self.command, path, self.headers.get("Range")))
            parts = path.strip("/").split("/")
            if parts[:2] == ["api", "models"] and (len(parts) == 4 or len(parts) >= 6):
                repo = "/".join(parts[2:4])
                if repo not in state.repos:
                    return self.send_error(404)
                files = state.repos[repo]
                if len(parts) == 4 or parts[4] == "revision":
                    return self._json(
                        {"id": repo, "sha": COMMIT, "siblings": [{"rfilename": n} for n in files]}
                    )
                if parts[4] == "tree":
                    return self._json([_entry(n, b) for n, b in files.items()])
            if len(parts) >= 5 and parts[2] == "resolve":
                repo, name = "/".join(parts[:2]), "/".join(parts[4:])
                body = state.repos.get(repo, {}).get(name)
                if body is None:
                    return self.send_error(404)
                return self._file(name, body)
            self.send_error(404)

        def _file(self, name: str, body: bytes) -> None:
            etag = hashlib.sha256(body).hexdigest()
            start = 0
            rng = self.headers.get("Range")
            if self.command == "GET":
                count = state.gets[name] = state.gets.get(name, 0) + 1
                fault = state.faults.get(name)
                if name in state.gates:
                    state.gates[name].wait(timeout=30)
                if fault == "flip":  # same size, one byte changed: only a checksum can tell
                    body = body[:-1] + bytes([body[-1] ^ 1])
                if fault in ("endless", "oversized"):
                    return self._too_long(name, body, fault)
                if fault == "truncate_then_503" and count > 1:
                    return self.send_error(503)
                if fault in ("truncate_once", "truncate_then_503", "truncate_then_whole") and count == 1:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("ETag", f'"{etag}"')
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2])
                    state.sent[name] = state.sent.get(name, 0) + len(body) // 2
                    self.wfile.flush()
                    self.close_connection = True
                    return
            honours_range = state.faults.get(name) != "truncate_then_whole"
            if rng and rng.startswith("bytes=") and self.command == "GET" and honours_range:
                start = int(rng[6:].split("-")[0])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(body) - start))
            self.send_header("ETag", f'"{etag}"')
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            if self.command == "GET":
                try:
                    self.wfile.write(body[start:])
                except OSError:  # a download stopped by another file's failure hung up
                    return
                state.sent[name] = state.sent.get(name, 0) + len(body) - start

        def _too_long(self, name: str, body: bytes, fault: str) -> None:
            """More bytes than listed: close-delimited without end, or with a length that says so."""
            total = state.cap if fault == "endless" else min(len(body) + state.overflow, state.cap)
            self.send_response(200)
            if fault == "oversized":
                self.send_header("Content-Length", str(total))
            self.send_header("X-Repo-Commit", COMMIT)
            self.end_headers()
            self.close_connection = True
            filler = bytes(64 << 10)
            try:
                self.wfile.write(body)
                state.sent[name] = state.sent.get(name, 0) + len(body)
                while state.sent[name] < total:
                    self.wfile.write(filler)
                    state.sent[name] += len(filler)
            except OSError:  # the client hung up: what a refusing downloader does
                pass

        do_GET = do_HEAD = _route

    return Handler


class LocalHub:
    """`with LocalHub(state) as hub:` serves on 127.0.0.1; `hub.endpoint` is its base URL."""

    def __init__(self, state: HubState, lifetime: float = 120.0) -> None:
        self.state = state
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._timer = threading.Timer(lifetime, self.server.shutdown)
        self._timer.daemon = True

    def __enter__(self) -> LocalHub:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)
