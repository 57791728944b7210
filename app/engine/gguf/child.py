"""Run a GGUF import in a child process and stream its events back.

Dequantizing and MLX run native code on an untrusted file; in a child, a crash costs an error
event instead of the app. The child writes one JSON event per line on stdout; the parent turns
them back into dataclasses and adds the child's exit status and peak memory. The parent also
holds the child to a memory and a time limit (limits.py) and ends it when either is passed.
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

from app.engine.gguf.destination import default_output, library_destination
from app.engine.gguf.events import (
    ImportEvent,
    ImportFailed,
    ImportFinished,
    ImportProgress,
    from_json,
    to_json,
)
from app.engine.gguf.header import GGUFError, GGUFHeader, read_header
from app.engine.gguf.limits import ChildWatch, Limits, cap_address_space
from app.engine.library.paths import remove_partial_folders
from app.engine.library.precision import default_bits

__all__ = ["ImportEvent", "ImportFailed", "ImportFinished", "ImportProgress", "default_output", "run_import"]


def import_limits(header: GGUFHeader, bits: int) -> Limits:
    """Memory: the importer's own estimate with room for its error. Time: generous for the
    slowest supported machine, in proportion to the file, so only a stuck import reaches it."""
    from app.engine.gguf.convert import working_set

    needed = working_set(header, bits)
    return Limits(needed + max(1 << 30, needed // 2), 600 + 1200 * header.file_size / 2**30)


def stopped_message(reason: str, limits: Limits) -> str:
    if reason == "memory":
        return (
            "the import was stopped: it needed more memory than allowed"
            f" ({limits.memory_bytes / 2**30:.1f} GiB)"
        )
    span = f"{limits.seconds / 60:.0f} minutes" if limits.seconds >= 120 else f"{limits.seconds:.0f} s"
    return f"the import was stopped: it took too long (over {span})"


def _peak_rss(rusage: object) -> int:
    rss = int(getattr(rusage, "ru_maxrss", 0))
    return rss if sys.platform == "darwin" else rss * 1024  # bytes on macOS, KiB on Linux


def run_import(
    source: str | Path,
    out: str | Path | None = None,
    bits: int | None = None,
    *,
    overwrite: bool = False,
    cancel: threading.Event | None = None,
    memory_limit: int | None = None,
    limits: Limits | None = None,
) -> Iterator[ImportEvent]:
    """Import in a child process, yielding progress and ending with ImportFinished or ImportFailed.

    The header is validated here first (pure Python), so a malformed file never starts a child.
    Setting `cancel` stops the child; its temporary folder is removed with it, as it is when the
    child passes `limits` (by default `import_limits`) and is ended. Without `out` the model
    lands in the library; a file already imported there finishes at once with `existing` set.
    Without `bits` it is this device's default (`default_bits`: 16 where MLX runs on the CPU).
    """
    bits = default_bits() if bits is None else bits
    source = Path(source)
    started = time.monotonic()
    try:
        header = read_header(source)
    except GGUFError as exc:
        yield ImportFailed(str(exc), "invalid")
        return
    if out is None and not overwrite:
        out, existing = library_destination(source, header, bits)
        if existing:
            yield ImportFinished(str(out), 0.0, 0, existing=True)
            return
    out = Path(out) if out is not None else default_output(source, bits)
    limits = limits or import_limits(header, bits)
    args = {
        "source": str(source),
        "out": str(out),
        "bits": bits,
        "overwrite": overwrite,
        "memory_limit": memory_limit,
        "watched_bytes": limits.memory_bytes,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.engine.gguf.child", json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    watch = ChildWatch(proc.pid, limits, cancel=cancel).start()
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
    watch.stop()  # the child has closed its output; stop before reaping so its id stays its own
    _, status, rusage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    drain.join(timeout=5)
    peak = _peak_rss(rusage)
    finished = isinstance(final, ImportFinished) and proc.returncode == 0
    if watch.reason in ("memory", "time") and not finished:  # a limit met on the way out is moot
        remove_partial_folders(out)
        yield ImportFailed(stopped_message(watch.reason, limits), "limit")
    elif finished:  # a cancel that came after the model was in place came too late: say so
        assert isinstance(final, ImportFinished)
        yield ImportFinished(final.path, time.monotonic() - started, peak)
    elif cancel is not None and cancel.is_set():
        remove_partial_folders(out)
        yield ImportFailed("the import was cancelled", "cancelled")
    elif isinstance(final, ImportFailed):
        yield final
    else:
        remove_partial_folders(out)
        code = proc.returncode
        why = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        tail = "".join(stderr_tail[-5:]).strip()
        yield ImportFailed(f"the importer crashed ({why}){': ' + tail if tail else ''}", "crashed")


def _child_main(raw: str) -> int:
    from app.engine.gguf.convert import ImportRefused, import_gguf

    args = json.loads(raw)

    terminated = False

    def write(event: ImportEvent) -> None:
        sys.stdout.write(json.dumps(to_json(event)) + "\n")
        sys.stdout.flush()

    def emit(event: ImportEvent) -> None:
        # a SIGTERM that arrived inside a finaliser had its exit swallowed there ("Exception
        # ignored"), and the import ran on to the end: the next step ends it instead
        if terminated:
            raise SystemExit(143)
        write(event)

    def on_sigterm(*_: object) -> None:
        nonlocal terminated
        terminated = True
        raise SystemExit(143)  # unwind so `finally` removes the temp folder

    signal.signal(signal.SIGTERM, on_sigterm)
    watched = args.get("watched_bytes")
    if watched:  # a backstop well above the watched limit, for a surge between two samples
        cap_address_space(2 * watched)
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
        write(ImportFailed(str(exc), "refused"))
        return 2
    except GGUFError as exc:
        write(ImportFailed(str(exc), "invalid"))
        return 2
    except MemoryError:  # the address-space backstop refused an allocation
        write(ImportFailed(stopped_message("memory", Limits(int(watched or 0), 0.0)), "limit"))
        return 1
    except Exception as exc:  # anything else still reaches the caller as an event
        write(ImportFailed(f"{type(exc).__name__}: {exc}", "error"))
        return 1
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the model is in place: say so, whatever comes
    write(ImportFinished(str(path), time.monotonic() - started, 0))
    return 0


if __name__ == "__main__":
    from app.engine.blas import ensure_blas

    ensure_blas()  # the same BLAS as the app, so the import's float dtype choice reads it right
    raise SystemExit(_child_main(sys.argv[1]))
