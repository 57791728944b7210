"""Benchmark (not a test): an answer in the window against `python -m app generate`, side by side.

    python -m app.devtools.window_vs_cli --main DIR [--draft DIR] [--k 4] [--max-tokens 48]

Both ask the same pair the same question at temperature 0 with the same speculation (a fixed draft
length with a draft, plain without), alternating, `--repeats` times each. The command line runs as
its own process each time and reports its first-token time (after the load) and its decode speed.
The window is the real one with the real engine worker, driven as a user drives it: the time from
pressing Enter to the first token reaching the transcript, and the engine's decode speed for that
answer. The window must be within 10 % of the command line on both: the UI thread, qasync and the
background threads have to leave the worker its share of the interpreter.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

PROMPT = "Write a Python function that returns the n-th Fibonacci number, with a short docstring."
TOLERANCE = 0.10
STATS_LINE = re.compile(r"([\d.]+) tok/s.*first token after ([\d.]+)s")


@dataclass(frozen=True, slots=True)
class Run:
    first_token_s: float
    tokens_per_s: float
    tokens: int


def cli_answer(
    main: str, draft: str | None, k: int, max_tokens: int, prompt: str, system: str | None = None
) -> Run:
    command = [sys.executable, "-m", "app", "generate", "--main", main, "--max-tokens", str(max_tokens)]
    command += ["--draft", draft, "--k", str(k)] if draft else []
    command += ["--system", system] if system else []
    result = subprocess.run(
        [*command, "--color", "never", prompt], capture_output=True, text=True, timeout=1800, check=False
    )
    found = STATS_LINE.search(result.stderr)
    if result.returncode != 0 or found is None:
        raise SystemExit(f"generate failed ({result.returncode}):\n{result.stderr}")
    tokens = int(re.search(r"(\d+) tokens", result.stderr).group(1))  # type: ignore[union-attr]
    return Run(float(found.group(2)), float(found.group(1)), tokens)


class WindowDriver:
    """The real window and worker, over a throwaway data folder, asked one question at a time."""

    def __init__(self, main: str, draft: str | None, k: int, max_tokens: int) -> None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        os.environ["SPECCHAT_HOME"] = tempfile.mkdtemp(prefix="specchat-window-bench-")
        from PySide6.QtWidgets import QApplication

        from app.engine.library.discovery import Sources
        from app.engine.library.paths import models_dir
        from app.ui.common.background import ensure_event_loop
        from app.ui.main_window import MainWindow

        self.app = QApplication.instance() or QApplication([])
        ensure_event_loop(self.app)
        self.window = MainWindow(sources=Sources(None, None, models_dir(), use_hub=False), restore_pair=False)
        self.window.resize(1100, 720)
        self.window.show()
        self.window.load_pair(main, draft)
        self._wait(lambda: self.window.controller.pair is not None, 600)
        controller = self.window.controller
        mode = "fixed" if draft else "off"
        controller.save_settings(
            replace(controller.chat_settings, max_tokens=max_tokens, temperature=0.0, speculation=mode, k=k)
        )

    def _wait(self, done: Callable[[], bool], timeout: float) -> None:
        """Run Qt's own event loop until `done`, as the app's `exec` does: a loop that polled
        `processEvents` would take interpreter time from the worker that the app never takes."""
        from PySide6.QtCore import QEventLoop, QTimer

        loop = QEventLoop()
        deadline = time.monotonic() + timeout
        check = QTimer()
        check.setInterval(100)
        check.timeout.connect(lambda: loop.quit() if done() or time.monotonic() > deadline else None)
        check.start()
        if not done():
            loop.exec()
        check.stop()
        if not done():
            raise SystemExit("the window did not answer in time")

    def answer(self, prompt: str) -> Run:
        from PySide6.QtCore import Qt
        from PySide6.QtTest import QTest

        from app.engine.decoding.events import GenerationFinished
        from app.engine.protocol import ResetSession, WorkerMessage
        from app.engine.store.transcript import Change

        w = self.window
        w.controller.new_conversation()
        w.bridge.submit(ResetSession())  # no cache reuse from the last question: both start cold
        first: list[float] = []
        finished: list[GenerationFinished] = []

        def observe(change: Change, _turn: object) -> None:
            if change is Change.EXTENDED:
                first.append(time.perf_counter())

        def on_batch(batch: tuple[WorkerMessage, ...]) -> None:
            finished.extend(m.event for m in batch if isinstance(m.event, GenerationFinished))

        w.controller.transcript.observers.append(observe)
        w.bridge.batch.connect(on_batch)
        w.composer.editor.setPlainText(prompt)
        pressed = time.perf_counter()
        QTest.keyClick(w.composer.editor, Qt.Key.Key_Return)
        self._wait(lambda: bool(finished) and not w.controller.busy, 1800)
        w.controller.transcript.observers.remove(observe)
        w.bridge.batch.disconnect(on_batch)
        stats = finished[0].stats
        return Run(first[0] - pressed, stats.tokens_per_second, stats.tokens)

    def close(self) -> None:
        self.window.close()
        self.app.processEvents()


def comparison_parser(description: str | None) -> argparse.ArgumentParser:
    """The options every "X against `generate`" benchmark takes: the pair, k, length, repeats."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--main", required=True)
    parser.add_argument("--draft")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompt", default=PROMPT)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = comparison_parser(__doc__).parse_args(argv)
    from app.engine.blas import ensure_blas

    ensure_blas()
    driver = WindowDriver(args.main, args.draft, args.k, args.max_tokens)
    cli: list[Run] = []
    window: list[Run] = []
    what = f"fixed k={args.k}" if args.draft else "plain"
    print(f"pair: {Path(args.main).name} + {Path(args.draft).name if args.draft else '(no draft)'}, {what}")
    print(f"{'run':>4} {'CLI first s':>12} {'window first s':>15} {'CLI tok/s':>10} {'window tok/s':>13}")
    for i in range(args.repeats):
        cli.append(cli_answer(args.main, args.draft, args.k, args.max_tokens, args.prompt))
        window.append(driver.answer(args.prompt))
        c, w = cli[-1], window[-1]
        print(
            f"{i + 1:>4} {c.first_token_s:>12.2f} {w.first_token_s:>15.2f} {c.tokens_per_s:>10.2f} {w.tokens_per_s:>13.2f}"
        )
    driver.close()
    c_first = statistics.median(r.first_token_s for r in cli)
    w_first = statistics.median(r.first_token_s for r in window)
    c_speed = statistics.median(r.tokens_per_s for r in cli)
    w_speed = statistics.median(r.tokens_per_s for r in window)
    first_ratio, speed_ratio = w_first / c_first, w_speed / c_speed
    print(f"{'med':>4} {c_first:>12.2f} {w_first:>15.2f} {c_speed:>10.2f} {w_speed:>13.2f}")
    print(f"window / CLI: first token {first_ratio:.2f}x the time, speed {speed_ratio:.2f}x")
    ok = first_ratio <= 1 + TOLERANCE and speed_ratio >= 1 - TOLERANCE
    print("PASS (within 10 %)" if ok else "FAIL (the window is more than 10 % behind)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
