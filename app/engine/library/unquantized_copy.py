"""Make an unquantized copy of a quantized model (dequantize.py) in a child process.

A child, not a thread of the app: the engine worker owns the app's MLX state, and a copy holds
gigabytes while it runs, which the child gives back when it exits. It also ends at once when
cancelled. The child writes one JSON event per line on stdout; the parent turns them back into
events. The copy lands in SpecChat's models folder, where the picker lists it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from app.engine.library.dequantize import (
    CopyEvent,
    CopyFailed,
    CopyFinished,
    CopyProgress,
    CopyRefused,
    copy_destination,
    quantization,
    read_config,
)
from app.engine.library.paths import remove_partial_folders

_KINDS: dict[str, type[CopyEvent]] = {c.__name__: c for c in (CopyProgress, CopyFinished, CopyFailed)}


def to_json(event: CopyEvent) -> dict[str, Any]:
    return {"event": type(event).__name__, **asdict(event)}


def from_json(data: dict[str, Any]) -> CopyEvent:
    data = dict(data)
    return _KINDS[data.pop("event")](**data)


def make_copy(
    source: str | Path,
    label: str,
    *,
    root: Path | None = None,
    cancel: threading.Event | None = None,
) -> Iterator[CopyEvent]:
    """Copy the quantized model folder `source` (named `label` in the library) unquantized into
    `root` (SpecChat's models folder by default), yielding progress and ending with CopyFinished
    or CopyFailed. An earlier copy of the same folder finishes at once with `existing` set."""
    source = Path(source)
    started = time.monotonic()
    try:
        if quantization(read_config(source)) is None:
            raise CopyRefused(f"{label} is not quantized: it needs no copy")
        out, existing = copy_destination(source, label, root)
    except CopyRefused as exc:
        yield CopyFailed(str(exc), "refused")
        return
    except (OSError, ValueError) as exc:
        yield CopyFailed(f"could not read {source}: {exc}", "refused")
        return
    if existing:
        yield CopyFinished(str(out), 0.0, existing=True)
        return
    args = json.dumps({"source": str(source), "out": str(out)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.engine.library.unquantized_copy", args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    stderr_tail: list[str] = []
    drain = threading.Thread(target=lambda: stderr_tail.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    drain.start()
    finished = threading.Event()
    if cancel is not None:

        def stop_when_cancelled() -> None:
            while not finished.is_set():
                if cancel.wait(0.1):
                    proc.terminate()  # the child removes its temporary folder on the way out
                    return

        threading.Thread(target=stop_when_cancelled, daemon=True).start()
    final: CopyEvent | None = None
    for line in proc.stdout:
        try:
            event = from_json(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue  # stray output from a native library
        if isinstance(event, (CopyFinished, CopyFailed)):
            final = event
        else:
            yield event
    code = proc.wait()
    finished.set()
    drain.join(timeout=5)
    if cancel is not None and cancel.is_set():
        remove_partial_folders(out)
        yield CopyFailed("the copy was cancelled", "cancelled")
    elif isinstance(final, CopyFinished) and code == 0:
        yield CopyFinished(final.path, time.monotonic() - started)
    elif isinstance(final, CopyFailed):
        yield final
    else:
        remove_partial_folders(out)
        why = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        tail = "".join(stderr_tail[-5:]).strip()
        yield CopyFailed(f"the copy stopped ({why}){': ' + tail if tail else ''}", "crashed")


def _child_main(raw: str) -> int:
    from app.engine.library.dequantize import dequantize_folder
    from app.engine.library.precision import STORED_DTYPE

    args = json.loads(raw)

    def emit(event: CopyEvent) -> None:
        sys.stdout.write(json.dumps(to_json(event)) + "\n")
        sys.stdout.flush()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind so `finally` removes the temp folder
    started = time.monotonic()
    try:
        path = dequantize_folder(args["source"], args["out"], STORED_DTYPE, emit)
    except CopyRefused as exc:
        emit(CopyFailed(str(exc), "refused"))
        return 2
    except Exception as exc:  # anything else still reaches the caller as an event
        emit(CopyFailed(f"{type(exc).__name__}: {exc}", "error"))
        return 1
    emit(CopyFinished(str(path), time.monotonic() - started))
    return 0


if __name__ == "__main__":
    from app.engine.blas import ensure_blas

    ensure_blas()  # before MLX, so the copy's dtype is chosen for the BLAS the app uses
    raise SystemExit(_child_main(sys.argv[1]))
