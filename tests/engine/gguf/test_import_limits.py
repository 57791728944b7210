"""The import child's real limits: memory and time are watched from the parent, the child is
ended when it passes either, the user gets one line and no partial output is left."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import pytest

from app.engine.gguf.child import ImportFailed, ImportProgress, run_import
from app.engine.gguf.limits import KILL_GRACE_S, ChildWatch, Limits
from tests.engine.gguf.test_import_memory import tiny_llama

MIB = 1 << 20

# A stand-in interpreter: the real child, with one tensor conversion replaced by `body`, so the
# importer itself carries no test hook. The hidden partial folder exists by then.
STAND_IN = """\
import os, resource, sys, time
sys.path.insert(0, {root!r})
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
import numpy as np
from app.engine.gguf import child, convert

def misbehave(*args, **kwargs):
{body}

convert._convert = misbehave
raise SystemExit(child._child_main(sys.argv[-1]))
"""

# Grows by 16 MiB at a time, slowly enough for the parent's samples to see it pass the limit.
GROW = """\
    hog = []
    while True:
        hog.append(np.ones(16 << 20, dtype=np.uint8))
        time.sleep(0.02)
"""
# One allocation far past every limit at once: only the address-space backstop can refuse it.
SURGE = """\
    hog = np.ones(8 << 30, dtype=np.uint8)
"""
HANG = """\
    while True:
        time.sleep(1)
"""


def run_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, limits: Limits
) -> tuple[list[object], Path]:
    source = tiny_llama(tmp_path / "tiny.gguf")
    script = tmp_path / "python-stand-in"
    root = str(Path(__file__).parents[3])
    script.write_text(f"#!{sys.executable}\n" + STAND_IN.format(root=root, body=body))
    script.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(script))  # run_import starts `sys.executable -m ...`
    out = tmp_path / "models" / "tiny-16bit"
    return list(run_import(source, out, 16, limits=limits)), out


def partials(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir()) if out.parent.exists() else []


def test_child_growing_past_its_memory_limit_is_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events, out = run_with(tmp_path, monkeypatch, GROW, Limits(400 * MIB, 600))
    assert any(isinstance(e, ImportProgress) and e.stage == "hash" for e in events)  # it had started
    assert events[-1] == ImportFailed(
        "the import was stopped: it needed more memory than allowed (0.4 GiB)", "limit"
    )
    assert partials(out) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="address-space limits are Linux's")
def test_allocation_past_the_backstop_is_refused_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events, out = run_with(tmp_path, monkeypatch, SURGE, Limits(400 * MIB, 600))
    assert events[-1] == ImportFailed(
        "the import was stopped: it needed more memory than allowed (0.4 GiB)", "limit"
    )
    assert partials(out) == []


def test_child_running_past_its_time_limit_is_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events, out = run_with(tmp_path, monkeypatch, HANG, Limits(1 << 40, 2))
    assert events[-1] == ImportFailed("the import was stopped: it took too long (over 2 s)", "limit")
    assert partials(out) == []


class FakeChild:
    """A clock that advances one second per look and a record of signals, for ChildWatch."""

    def __init__(self, rss: int = 0) -> None:
        self.now, self.rss, self.signals = 0.0, rss, list[int]()

    def clock(self) -> float:
        self.now += 1.0
        return self.now

    def watch(self, limits: Limits, cancel: threading.Event | None = None) -> ChildWatch:
        return ChildWatch(
            42,
            limits,
            cancel=cancel,
            interval=0,
            rss=lambda pid: self.rss,
            clock=self.clock,
            kill=lambda pid, sig: self.signals.append(sig),
        )


def test_watch_kills_on_memory() -> None:
    child = FakeChild(rss=2 * MIB)
    watch = child.watch(Limits(MIB, 1e9))
    watch.run()
    assert (watch.reason, watch.peak, child.signals) == ("memory", 2 * MIB, [signal.SIGKILL])


def test_watch_kills_on_time() -> None:
    child = FakeChild(rss=MIB)
    watch = child.watch(Limits(MIB, 30))
    watch.run()
    assert (watch.reason, child.signals) == ("time", [signal.SIGKILL])
    assert child.now > 30


def test_watch_asks_a_cancelled_child_to_stop_then_kills_it() -> None:
    cancel = threading.Event()
    cancel.set()
    child = FakeChild()
    watch = child.watch(Limits(MIB, 1e9), cancel)
    watch.run()
    assert (watch.reason, child.signals) == ("cancelled", [signal.SIGTERM, signal.SIGKILL])
    assert child.now >= KILL_GRACE_S
