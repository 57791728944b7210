"""UI benchmark cases for huge text (not tests): a paste sent, and a draft switched to and away.

Each case drives the real window over the synthetic engine and measures what the streaming case
measures (app.devtools.bench): the lateness of a 10 ms timer on the GUI thread, over the whole
case. Every step is repeated with a short idle between, so stalls are a share of the ticks that
p99 sees rather than one tick among thousands; the slowest step is timed on its own too.

The clipboard holds UTF-8 bytes, as the desktop platforms hand a paste over. One built from a
Python string instead makes Qt convert all of it to bytes when the paste is read (about 0.1 s per
100 MB), a cost of the test set-up that a real clipboard does not add.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QByteArray, QMimeData
from PySide6.QtWidgets import QApplication

from app.devtools.bench import STALL_P99_MS, StallMeter, open_window

PASTE_BYTES = 100_000_000  # a pasted log or dump: any work on the window's thread that grows with it shows
NEWLINES = 100_000  # many short lines: Qt's layout time grows with lines faster than with characters
DRAFT_CHARS = 10_000_000  # one huge line kept as a draft: it must not be laid out on every switch
IDLE_S = 0.1  # between steps: ten ticks


@dataclass(frozen=True, slots=True)
class CaseResult:
    name: str
    what: str  # what the case did, in a line
    steps: int
    slowest_step_ms: float
    stall_p50_ms: float
    stall_p99_ms: float
    stall_max_ms: float
    kept_whole: bool  # what was kept, saved and sent is the text (up to the cap), nothing lost


class _Case:
    """A window, a stall meter running over the whole case, and timed steps between idles."""

    def __init__(self, prefix: str) -> None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        home = Path(tempfile.mkdtemp(prefix=prefix))
        os.environ["SPECCHAT_HOME"] = str(home)
        self.app, self.window = open_window(home, rate=2000.0, tokens=40)
        self.meter = StallMeter()
        self.slowest = 0.0
        self.steps = 0

    def idle(self, seconds: float = IDLE_S) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            self.app.processEvents()
            time.sleep(0.001)

    def step(self, action: Callable[[], object]) -> None:
        started = time.perf_counter()
        action()
        self.slowest = max(self.slowest, (time.perf_counter() - started) * 1000)
        self.steps += 1
        self.idle()

    def clipboard(self, text: str) -> None:
        """Put `text` on the clipboard as bytes; the meter does not count the bench's own work."""
        self.meter.stop()
        mime = QMimeData()
        mime.setData("text/plain", QByteArray(text.encode()))
        QApplication.clipboard().setMimeData(mime)
        self.meter.start()

    def wait_answer(self) -> None:
        while self.window.controller.busy:
            self.app.processEvents()
            time.sleep(0.001)
        self.idle()

    def result(self, name: str, what: str, kept_whole: bool) -> CaseResult:
        self.meter.stop()
        self.window.close()
        # the clipboard owns the bench's mime data; freed at Qt's exit, after Python's, it crashes
        QApplication.clipboard().clear()
        self.app.processEvents()
        m = self.meter
        return CaseResult(name, what, self.steps, self.slowest, m.p(0.5), m.p(0.99), m.p(1.0), kept_whole)


def paste_case(rounds: int = 3) -> CaseResult:
    """Paste 100 MB of prose and send it, then 100,000 blank lines between two words, `rounds`
    times each; what is saved and sent must be the text, up to the cap."""
    from app.engine.protocol import Generate
    from app.ui.chat.text.long_text import MAX_CHARS

    case = _Case("specchat-bench-paste-")
    w = case.window
    w.controller.send("A short question first")  # the first answer's one-off costs are not the paste's
    case.wait_answer()
    w.controller.new_conversation()
    prose = "The otter floats on its back and cracks a shell on its chest. "
    texts = [
        (prose * (PASTE_BYTES // len(prose) + 1))[:PASTE_BYTES],
        "Why?" + "\n" * NEWLINES + "Because.",
    ]
    kept_whole = True
    case.meter.start()
    for _ in range(rounds):
        for text in texts:
            case.clipboard(text)
            case.step(w.composer.editor.paste)
            case.step(w.composer._submit)
            case.wait_answer()
            expected = text[:MAX_CHARS]
            sent = [c for c in w.bridge.engine.commands if isinstance(c, Generate)][-1]  # type: ignore[attr-defined]
            stored = w.store.load(w.controller.conversation).messages[0].content  # type: ignore[arg-type]
            kept_whole &= stored == expected and sent.messages[-1]["content"] == expected
            case.step(w.controller.new_conversation)
    what = f"{rounds} x (paste {PASTE_BYTES / 1e6:.0f} MB and send; paste {NEWLINES:,} blank lines and send)"
    return case.result("paste", what, kept_whole)


def switch_case(rounds: int = 10) -> CaseResult:
    """Paste a 10 MB line into one conversation's box, let it be saved as a draft, then switch
    away from and back to that conversation `rounds` times."""
    from app.ui.chat.text.long_text import MAX_CHARS

    case = _Case("specchat-bench-switch-")
    w = case.window
    a, b = w.store.create("With a long draft"), w.store.create("Another")
    w.refresh_sidebar()
    w.controller.open(a)
    line = "x" * DRAFT_CHARS
    case.meter.start()
    case.clipboard(line)
    case.step(w.composer.editor.paste)
    case.idle(1.5)  # the draft is saved a second after the box last changed
    for _ in range(rounds):
        case.step(lambda: w.controller.open(b))
        case.step(lambda: w.controller.open(a))
    kept_whole = w.composer.editor.toPlainText() == line[:MAX_CHARS] == w.controller.drafts.get(a)
    what = f"a {DRAFT_CHARS / 1e6:.0f} MB line pasted as a draft, then {rounds} x (switch away; switch back)"
    return case.result("switch", what, kept_whole)


def case_report(r: CaseResult) -> str:
    return (
        f"{r.name}: {r.what}\n"
        f"  event-loop stall: p50 {r.stall_p50_ms:.1f} ms, p99 {r.stall_p99_ms:.1f} ms,"
        f" max {r.stall_max_ms:.1f} ms; slowest of {r.steps} steps {r.slowest_step_ms:.0f} ms"
    )


def case_verdict(r: CaseResult) -> list[tuple[str, bool | None]]:
    return [
        (
            f"{r.name}: event-loop stall p99 under {STALL_P99_MS:.0f} ms ({r.stall_p99_ms:.1f} ms)",
            r.stall_p99_ms < STALL_P99_MS,
        ),
        (f"{r.name}: the text kept, saved and sent whole up to the cap ({r.kept_whole})", r.kept_whole),
    ]
