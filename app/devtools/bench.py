"""UI benchmark (not a test): the real window fed by a synthetic engine at a fixed token rate.

Measures what reached the view (and in what order), how long the GUI thread's event loop was
stalled (lateness of a 10 ms precise timer), and resident memory along a long answer.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtWidgets import QApplication

if TYPE_CHECKING:
    from app.ui.main_window import MainWindow


def rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:  # macOS: peak RSS is the best cheap figure
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


SHOWN_SHARE = 0.99  # of the tokens the finished answer shows, shown live and in order
STALL_P99_MS = 50.0  # the window's event loop late by less than this 99 % of the time
GROWTH_MB_PER_2000 = 2.0  # memory per 2,000 tokens of answer, after the first 2,000


class StallMeter:
    """How long the GUI thread's event loop was held: the lateness of a 10 ms precise timer, one
    gap per tick; `tick` (optional) runs on each."""

    def __init__(self, tick: Callable[[], None] | None = None) -> None:
        self.gaps: list[float] = []
        self.last = time.perf_counter()
        self.on_tick = tick
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        self.gaps.append(max(0.0, (now - self.last) * 1000 - 10))
        self.last = now
        if self.on_tick is not None:
            self.on_tick()

    def start(self) -> None:
        """(Re)start counting from now: what the bench itself did before is no stall."""
        self.last = time.perf_counter()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def p(self, q: float) -> float:
        ordered = sorted(self.gaps)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def open_window(home: Path, rate: float, tokens: int) -> tuple[QApplication, MainWindow]:
    """The real main window over the synthetic engine, shown, with a pair loaded."""
    app = QApplication.instance() or QApplication([])
    assert isinstance(app, QApplication)
    from app.devtools.fake_engine import FakeEngine
    from app.engine.library.discovery import Sources
    from app.engine.store.conversations import ConversationStore
    from app.ui.chat.settings_dialog import ChatSettings
    from app.ui.common.background import ensure_event_loop
    from app.ui.main_window import MainWindow

    ensure_event_loop(app)
    (home / "m").mkdir(exist_ok=True)
    window = MainWindow(
        engine_factory=lambda emit: FakeEngine(emit, rate=rate),
        store=ConversationStore(home / "c.sqlite3"),
        settings=QSettings(str(home / "s.ini"), QSettings.Format.IniFormat),
        sources=Sources(None, None, home / "m", use_hub=False),
        restore_pair=False,
    )
    window.resize(1100, 720)
    window.show()
    window.load_pair("/bench/main", "/bench/draft")
    while window.controller.pair is None:
        app.processEvents()
    window.controller.chat_settings = ChatSettings(max_tokens=tokens)
    return app, window


@dataclass(frozen=True, slots=True)
class BenchResult:
    tokens: int
    visible: int  # tokens the finished answer shows a character of (markup such as ** shows none)
    shown: int
    in_order: bool
    stall_p50_ms: float
    stall_p99_ms: float
    stall_max_ms: float
    final_render_ms: float
    rss_mb: tuple[tuple[int, float], ...]  # (tokens so far, MB)
    seconds: float
    drawn_live: tuple[int, float] = (0, 0.0)  # (tokens, MB) once drawn live, before the count below

    @property
    def growth_mb_per_2000(self) -> float | None:
        """Memory grown per 2,000 tokens from the first sample past 2,000 tokens to the answer
        drawn live (the bench's own lists of what was shown are made after it); None when the
        answer is too short to tell."""
        first = next((s for s in self.rss_mb if s[0] >= 2000), None)
        if first is None or self.drawn_live[0] < first[0] + 2000:
            return None
        return (self.drawn_live[1] - first[1]) / (self.drawn_live[0] - first[0]) * 2000

    @property
    def growth_from(self) -> int:
        """Tokens at the sample the growth is measured from."""
        return next((n for n, _ in self.rss_mb if n >= 2000), 0)


def run(rate: float = 2000.0, tokens: int = 20_000) -> BenchResult:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    home = Path(tempfile.mkdtemp(prefix="specchat-bench-"))
    os.environ["SPECCHAT_HOME"] = str(home)
    from app.ui.chat.text.render import P_MESSAGE, block_tokens

    app, window = open_window(home, rate, tokens)
    shown: list[int] = []
    view = window.view
    original_finish = view.finish_live
    final_ms: list[float] = []

    final: set[int] = set()
    drawn_live: list[tuple[int, float]] = []

    def tokens_of(key: int) -> list[int]:
        """Token indices of message `key` in document order, one entry per fragment."""
        out = []
        block = view.document().begin()
        while block.isValid():
            for fragment, token in block_tokens(block):
                if fragment.charFormat().property(P_MESSAGE) == key and token is not None:
                    out.append(token)
            block = block.next()
        return out

    def finish_and_count(m: Any) -> None:
        """What the live view showed, read just before the last batch is drawn final."""
        drawn_live.append((len(m.answer.parts), rss_mb()))
        for token in tokens_of(m.key):
            if not shown or shown[-1] != token:
                shown.append(token)
        t = time.perf_counter()
        original_finish(m)
        final_ms.append((time.perf_counter() - t) * 1000)
        final.update(tokens_of(m.key))

    view.finish_live = finish_and_count  # type: ignore[method-assign]
    samples: list[tuple[int, float]] = [(0, rss_mb())]

    def sample() -> None:
        live = window.controller.live
        if live is not None and live.stats.tokens >= samples[-1][0] + 2000:
            samples.append((live.stats.tokens, rss_mb()))

    meter = StallMeter(sample)
    start = time.perf_counter()
    window.controller.send("Benchmark: a very long answer")
    meter.start()
    while window.controller.busy:
        app.processEvents()
        time.sleep(0.001)
    meter.stop()
    seconds = time.perf_counter() - start
    samples.append((tokens, rss_mb()))
    window.close()

    return BenchResult(
        tokens,
        len(final),
        len(set(shown)),
        shown == sorted(shown),
        meter.p(0.5),
        meter.p(0.99),
        meter.p(1.0),
        final_ms[0] if final_ms else 0.0,
        tuple(samples),
        seconds,
        drawn_live[0] if drawn_live else (0, 0.0),
    )


def report(r: BenchResult) -> str:
    lines = [
        f"tokens streamed: {r.tokens} in {r.seconds:.1f} s ({r.tokens / r.seconds:.0f} tok/s end to end)",
        f"shown by the live view: {r.shown} of the {r.visible} tokens the finished answer shows"
        f" ({r.shown / r.visible:.2%}), in order: {r.in_order} (the other {r.tokens - r.visible} are"
        " line breaks or markdown marks)",
        f"event-loop stall: p50 {r.stall_p50_ms:.1f} ms, p99 {r.stall_p99_ms:.1f} ms, max {r.stall_max_ms:.1f} ms",
        f"drawing the last open block final: {r.final_render_ms:.0f} ms (once, at the end)",
        "RSS MB by tokens: " + ", ".join(f"{n}:{mb:.0f}" for n, mb in r.rss_mb),
    ]
    growth = r.rss_mb[-1][1] - r.rss_mb[1][1] if len(r.rss_mb) > 2 else 0.0
    lines.append(f"RSS growth from {r.rss_mb[1][0]} tokens to the end: {growth:.1f} MB")
    if len(r.rss_mb) > 3:
        lines.append(
            f"median step per 2000 tokens: {statistics.median(b[1] - a[1] for a, b in zip(r.rss_mb[1:], r.rss_mb[2:])):.2f} MB"
        )
    return "\n".join(lines)


def verdict(r: BenchResult) -> list[tuple[str, bool | None]]:
    """Each target with this run's figure, and whether it was met (None: too short to tell)."""
    growth = r.growth_mb_per_2000
    return [
        (
            f"shown live in order: at least {SHOWN_SHARE:.0%} of the tokens the answer shows"
            f" ({r.shown / max(r.visible, 1):.2%}, in order: {r.in_order})",
            r.shown >= SHOWN_SHARE * r.visible and r.in_order,
        ),
        (
            f"event-loop stall p99 under {STALL_P99_MS:.0f} ms ({r.stall_p99_ms:.1f} ms)",
            r.stall_p99_ms < STALL_P99_MS,
        ),
        (
            f"memory growth at most {GROWTH_MB_PER_2000:.0f} MB per 2,000 tokens after the first 2,000 ("
            + (
                f"{growth:.2f} MB, from {r.growth_from} to {r.drawn_live[0]} tokens drawn live)"
                if growth is not None
                else "the answer needs 4,000 tokens or more)"
            ),
            None if growth is None else growth <= GROWTH_MB_PER_2000,
        ),
    ]
