"""Run a GGUF import in a child process and stream its events back.

Dequantizing and MLX run native code on an untrusted file; in a child, a crash costs an error
event instead of the app. The child writes one JSON event per line on stdout; the parent turns
them back into dataclasses and adds the child's exit status and peak memory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from app.engine.gguf.events import (
    ImportEvent,
    ImportFailed,
    ImportFinished,
    ImportProgress,
    from_json,
    to_json,
)
from app.engine.gguf.fixtures import cache_root
from app.engine.gguf.header import GGUFError, read_header

__all__ = ["ImportEvent", "ImportFailed", "ImportFinished", "ImportProgress", "default_output", "run_import"]


def default_output(source: str | Path, bits: int) -> Path:
    """Where an import lands by default: <cache>/mlx/<file stem>-<bits>bit."""
    return cache_root() / "mlx" / f"{Path(source).stem}-{bits}bit"


def _peak_rss(rusage: object) -> int:
    rss = int(getattr(rusage, "ru_maxrss", 0))
    return rss if sys.platform == "darwin" else rss * 1024  # bytes on macOS, KiB on Linux


def run_import(
    source: str | Path,
    out: str | Path | None = None,
    bits: int = 4,
    *,
    overwrite: bool = False,
    cancel: threading.Event | None = None,
    memory_limit: int | None = None,
) -> Iterator[ImportEvent]:
    """Import in a child process, yielding progress and ending with ImportFinished or ImportFailed.

    The header is validated here first (pure Python), so a malformed file never starts a child.
    Setting `cancel` stops the child; its temporary folder is removed with it.
    """
    source = Path(source)
    out = Path(out) if out is not None else default_output(source, bits)
    started = time.monotonic()
    try:
        read_header(source)
    except GGUFError as exc:
        yield ImportFailed(str(exc), "invalid")
        return
    args = {
        "source": str(source),
        "out": str(out),
        "bits": bits,
        "overwrite": overwrite,
        "memory_limit": memory_limit,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.engine.gguf.child", json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    watcher = None
    if cancel is not None:

        def watch() -> None:
            while proc.poll() is None:
                if cancel.wait(0.2):
                    proc.send_signal(signal.SIGTERM)
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
    final: ImportEvent | None = None
    assert proc.stdout is not None and proc.stderr is not None
    stderr_tail: list[str] = []
    drain = threading.Thread(target=lambda: stderr_tail.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    drain.start()
    for line in proc.stdout:
        try:
            event = from_json(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue  # stray output from a native library
        if isinstance(event, (ImportFinished, ImportFailed)):
            final = event
        else:
            yield event
    _, status, rusage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    drain.join(timeout=5)
    peak = _peak_rss(rusage)
    if cancel is not None and cancel.is_set():
        _remove_partials(out)
        yield ImportFailed("the import was cancelled", "cancelled")
    elif isinstance(final, ImportFinished) and proc.returncode == 0:
        yield ImportFinished(final.path, time.monotonic() - started, peak)
    elif isinstance(final, ImportFailed):
        yield final
    else:
        _remove_partials(out)
        code = proc.returncode
        why = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        tail = "".join(stderr_tail[-5:]).strip()
        yield ImportFailed(f"the importer crashed ({why}){': ' + tail if tail else ''}", "crashed")


def _remove_partials(out: Path) -> None:
    """A killed child cannot clean up after itself: remove its hidden temporary folders."""
    import shutil

    for tmp in out.parent.glob(f".{out.name}.partial-*"):
        shutil.rmtree(tmp, ignore_errors=True)


def _child_main(raw: str) -> int:
    from app.engine.gguf.convert import ImportRefused, import_gguf

    args = json.loads(raw)

    def emit(event: ImportEvent) -> None:
        sys.stdout.write(json.dumps(to_json(event)) + "\n")
        sys.stdout.flush()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind so `finally` removes the temp folder
    started = time.monotonic()
    try:
        path = import_gguf(
            args["source"],
            args["out"],
            args["bits"],
            emit=emit,
            overwrite=args["overwrite"],
            memory_limit=args.get("memory_limit"),
        )
    except ImportRefused as exc:
        emit(ImportFailed(str(exc), "refused"))
        return 2
    except GGUFError as exc:
        emit(ImportFailed(str(exc), "invalid"))
        return 2
    except Exception as exc:  # anything else still reaches the caller as an event
        emit(ImportFailed(f"{type(exc).__name__}: {exc}", "error"))
        return 1
    emit(ImportFinished(str(path), time.monotonic() - started, 0))
    return 0


if __name__ == "__main__":
    raise SystemExit(_child_main(sys.argv[1]))
