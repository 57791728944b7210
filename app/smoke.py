"""`--smoke-test`: prove that an installed (or frozen) SpecChat really works, then exit.

It starts Qt offscreen, builds the main window, writes the toy main/draft pair to a temporary
folder, loads it on an `EngineWorker` and generates with speculation at a fixed draft length.
On success it prints one line to stdout, starting `SMOKE_OK`, with the generation's stats, and
returns 0. Any failure prints `SMOKE_FAIL <message>` (with a traceback when it is unexpected)
to stderr and returns 1. The packaged-app CI job runs this inside the PyInstaller bundle, so
every step here also checks that the bundle carries what it needs at run time.
"""

from __future__ import annotations

import os
import queue
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.engine.protocol import WorkerMessage
    from app.ui.main_window import MainWindow

DEFAULT_TIMEOUT = 180.0  # seconds for the whole test; the toy pair needs a few on one CPU core
DRAFT_K = 4
MAX_TOKENS = 48
PROMPT = "Tell me about speculative decoding."


class SmokeFailure(Exception):
    """An expected kind of failure: reported as one line, without a traceback."""


def run_smoke_test(timeout: float | None = None) -> int:
    from app.engine.blas import ensure_blas

    ensure_blas()  # a no-op after `python -m app`, which loaded it; first when called directly
    if timeout is None:
        timeout = float(os.environ.get("SPECCHAT_SMOKE_TIMEOUT", DEFAULT_TIMEOUT))
    # The smoke test never shows a window, on any platform.
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    try:
        line = _smoke(timeout)
    except SmokeFailure as exc:
        print(f"SMOKE_FAIL {exc}", file=sys.stderr, flush=True)
        return 1
    except BaseException as exc:
        traceback.print_exc(file=sys.stderr)
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        print(f"SMOKE_FAIL {detail}", file=sys.stderr, flush=True)
        return 1
    print(line, flush=True)
    return 0


def _smoke(timeout: float) -> str:
    started = time.monotonic()
    deadline = started + timeout

    from PySide6.QtWidgets import QApplication

    from app import PRODUCT_NAME, __version__

    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else PRODUCT_NAME])
    app.setApplicationName(PRODUCT_NAME)
    window = _make_window()
    app.processEvents()

    import mlx.core as mx

    from app.engine.decoding.events import EngineError, GenerationFinished, RoundEvent, TokenEvent
    from app.engine.measure.toy import write_toy_models
    from app.engine.protocol import Generate, LoadPair, PairLoaded, SpeculationMode, SpeculationSettings
    from app.engine.worker import EngineWorker

    library = _check_mlx_library()
    inbox: queue.Queue[WorkerMessage] = queue.Queue()
    worker = EngineWorker(inbox.put)
    worker.start()
    tmp = Path(tempfile.mkdtemp(prefix="specchat-smoke-"))
    try:
        toy = write_toy_models(tmp / "models", seed=0)

        def wait(request: int) -> list[object]:
            events: list[object] = []
            while True:
                if time.monotonic() > deadline:
                    raise SmokeFailure(f"timed out after {timeout:.0f} s waiting for the engine")
                app.processEvents()
                try:
                    message = inbox.get(timeout=0.05)
                except queue.Empty:
                    if not worker.is_alive:
                        raise SmokeFailure("the engine thread died") from None
                    continue
                if message.request != request:
                    continue
                event = message.event
                if isinstance(event, EngineError):
                    if event.kind == "notice":
                        continue
                    raise SmokeFailure(f"engine {event.kind} error: {event.message}")
                events.append(event)
                if isinstance(event, (PairLoaded, GenerationFinished)):
                    return events

        [loaded] = wait(worker.submit(LoadPair(str(toy.main), str(toy.draft))))
        if not isinstance(loaded, PairLoaded):
            raise SmokeFailure(f"the engine answered a load with {loaded!r}")
        if loaded.speculation_refusal is not None:
            raise SmokeFailure(f"the toy pair may not speculate: {loaded.speculation_refusal}")

        ask = Generate(
            ({"role": "user", "content": PROMPT},),
            speculation=SpeculationSettings(SpeculationMode.FIXED, DRAFT_K),
            max_tokens=MAX_TOKENS,
        )
        events = wait(worker.submit(ask))
        done = events[-1]
        if not isinstance(done, GenerationFinished):
            raise SmokeFailure(f"the engine ended a generation with {done!r}")
        stats = done.stats
        tokens = [e for e in events if isinstance(e, TokenEvent)]
        rounds = [e for e in events if isinstance(e, RoundEvent)]
        if stats.tokens <= 0 or not tokens:
            raise SmokeFailure("the generation produced no token")
        if stats.proposed <= 0 or not any(r.k > 0 for r in rounds):
            raise SmokeFailure("the generation did not speculate (no draft token was proposed)")
        if "".join(e.text for e in tokens) + done.tail != done.text:
            raise SmokeFailure("the streamed token texts do not add up to the answer")
    finally:
        stopped = worker.shutdown(timeout=10.0)
        shutil.rmtree(tmp, ignore_errors=True)
        if window is not None:
            window.close()
            window.deleteLater()
        app.processEvents()
    if not stopped:
        raise SmokeFailure("the engine thread did not stop")

    fields = {
        "tokens": stats.tokens,
        "tok_per_s": f"{stats.tokens_per_second:.1f}",
        "acceptance": f"{stats.acceptance:.3f}",
        "rounds": stats.rounds,
        "proposed": stats.proposed,
        "accepted": stats.accepted,
        "k": DRAFT_K,
        "reason": done.reason,
        "device": mx.default_device().type.name,
        "window": "yes" if window is not None else "none",
        "frozen": "yes" if getattr(sys, "frozen", False) else "no",
        "version": __version__,
        "libmlx": library or "unknown",
        "seconds": f"{time.monotonic() - started:.1f}",
    }
    return "SMOKE_OK " + " ".join(f"{key}={value}" for key, value in fields.items())


def _make_window() -> MainWindow | None:
    """The main window, when the UI package provides one; None only when its module is absent.

    A missing dependency *inside* the UI (say a Qt module the bundle lacks) is a failure.
    """
    try:
        from app.ui.main_window import MainWindow
    except ModuleNotFoundError as exc:
        if exc.name in ("app.ui", "app.ui.main_window"):
            return None
        raise
    from PySide6.QtWidgets import QApplication

    from app.ui.common.background import ensure_event_loop

    app = QApplication.instance()
    assert app is not None  # made by _smoke before the window
    ensure_event_loop(app)  # the window's scans run on it while events pump
    window = MainWindow()
    window.resize(1100, 720)
    window.show()
    return window


def _check_mlx_library() -> str | None:
    """Name the libmlx this process loaded; on macOS, insist that mlx.metallib sits beside it.

    MLX looks for its Metal kernels next to the libmlx binary that is actually loaded, so a
    bundle that put the two in different folders would fail only at the first GPU operation.
    """
    path = _loaded_libmlx()
    if sys.platform == "darwin":
        if path is None:
            raise SmokeFailure("could not find the loaded libmlx among the process's images")
        if not (path.parent / "mlx.metallib").exists():
            raise SmokeFailure(f"mlx.metallib is not next to the loaded {path}")
    return None if path is None else _short(path)


def _loaded_libmlx() -> Path | None:
    if sys.platform == "darwin":
        import ctypes

        dyld = ctypes.CDLL(None)
        dyld._dyld_image_count.restype = ctypes.c_uint32
        dyld._dyld_get_image_name.restype = ctypes.c_char_p
        dyld._dyld_get_image_name.argtypes = [ctypes.c_uint32]
        for index in range(dyld._dyld_image_count()):
            name = dyld._dyld_get_image_name(index)
            if name and Path(os.fsdecode(name)).name.startswith("libmlx."):
                return Path(os.fsdecode(name))
        return None
    maps = Path("/proc/self/maps")
    if maps.exists():
        for line in maps.read_text(errors="replace").splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and Path(parts[5]).name.startswith("libmlx."):
                return Path(parts[5])
    return None


def _short(path: Path) -> str:
    """The library's path relative to the bundle (or site-packages), for a readable line."""
    for base in (getattr(sys, "_MEIPASS", None), *sys.path):
        if base:
            try:
                return str(path.relative_to(base))
            except ValueError:
                continue
    return str(path)
