"""Long waits show live progress with time and an estimate, and can be cancelled where shown."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QSettings

from app.devtools.fake_engine import ExactClock, FakeEngine
from app.engine.gguf.events import ImportFailed, ImportProgress
from app.engine.store.transcript import MessageState
from app.ui.common.wait_progress import WaitPanel
from app.ui.main_window import MainWindow
from tests.ui.test_main_window import make_window


class ManualClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_slow_prompt_read_moves_every_second_with_elapsed_time_and_an_estimate(qtbot, tmp_path):
    clock = ManualClock()
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    panel = WaitPanel(settings, clock)
    qtbot.addWidget(panel)
    stopped: list[bool] = []
    panel.begin(
        "p", "Reading the prompt", memory="prompt:m", cancel=lambda: stopped.append(True), unit="tokens"
    )
    clock.t = 0.3
    panel.tick()
    assert panel.isHidden()  # a short wait passes without a row
    clock.t = 0.75
    panel.tick()
    assert not panel.isHidden()
    assert panel.text("p") == "Reading the prompt · 0 s so far · estimating…"
    seen: list[tuple[float, str]] = [(clock.t, panel.text("p"))]
    chunk_every = 3.0  # a slow backend: a chunk of the prompt only every three seconds
    while clock.t < 12.0:
        clock.t = round(clock.t + 0.25, 2)
        if clock.t % chunk_every == 0:
            panel.progress("p", 512 * clock.t / chunk_every, 4096)
        panel.tick()
        seen.append((clock.t, panel.text("p")))
    changes = [t for (t, text), (_, before) in zip(seen[1:], seen, strict=False) if text != before]
    moments = [seen[0][0], *changes, clock.t]
    gaps = [b - a for a, b in zip(moments, moments[1:], strict=False)]
    assert max(gaps) <= 1.0, f"the wait's words change at least once a second; gaps {gaps}"
    assert seen[-1][1] == "Reading the prompt · 2,048 of 4,096 tokens · 12 s so far · about 12 s left"
    row = panel.rows["p"]
    assert row.button.text() == "Stop" or row.button.text() == "Cancel"
    row.button.click()
    assert stopped == [True], "the Stop button stops the work"
    assert panel.isHidden(), "a stopped wait leaves the panel"
    # the next prompt of this model starts with an estimate from this one's pace
    panel.begin("r", "Reading the prompt", memory="prompt:m", unit="tokens")
    panel.progress("r", 0, 1024)
    clock.t += 1.0
    panel.tick()
    assert panel.text("r") == "Reading the prompt · 0 of 1,024 tokens · 1 s so far · about 5 s left"


def open_window(qtbot, home, **engine) -> tuple[MainWindow, FakeEngine]:
    made: list[FakeEngine] = []

    def factory(emit):
        made.append(FakeEngine(emit, rate=300.0, clock=ExactClock(), **engine))
        return made[-1]

    w = make_window(qtbot, home, engine_factory=factory)
    return w, made[0]


@pytest.fixture
def slow_prompt(qtbot, specchat_home):
    w, engine = open_window(qtbot, specchat_home, prefill_chunks=40, prompt_tokens=4096)
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    yield w, engine
    w.close()


def test_reading_the_prompt_shows_progress_and_stop_cancels_it(qtbot, slow_prompt):
    w, engine = slow_prompt
    engine.prefill_seconds = 20.0  # half a second per chunk of the prompt
    texts: list[str] = []
    w.waits.changed.connect(lambda _key, text: texts.append(text))
    assert w.controller.send("Explain speculative decoding")
    qtbot.waitUntil(lambda: any("of 4,096 tokens" in t and "left" in t for t in texts), timeout=10_000)
    assert [t for t in texts if not t.startswith("Reading the prompt")] == [], (
        "every wait says it reads the prompt"
    )
    assert any("so far" in t for t in texts)
    (row,) = w.waits.rows.values()
    assert row.button.text() == "Stop", "reading the prompt can be stopped"
    assert row.isVisible(), "the Stop button is shown"
    row.button.click()
    assert not w.controller.busy, "Stop ends the answer at once"
    assert w.waits.isHidden(), "the wait is gone after Stop"
    assert w.controller.transcript.last_answer().state is MessageState.CANCELLED
    engine.prefill_seconds = 0.0  # the next answer comes at once if the slow read really stopped
    assert w.controller.send("Again")
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=8_000)
    assert w.controller.transcript.last_answer().state is MessageState.COMPLETE


def test_a_slow_load_shows_its_time_and_can_be_cancelled(qtbot, specchat_home):
    w, engine = open_window(qtbot, specchat_home, load_seconds=3.0)
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: not w.waits.isHidden(), timeout=5000)
    (key,) = w.waits.rows
    assert w.waits.text(key).startswith("Loading main and draft · 0 s so far")
    w.waits.rows[key].button.click()
    assert w.pair_label.text() == "Loading cancelled", "the window says the load was cancelled"
    assert w.waits.isHidden(), "the wait is gone after Cancel"
    qtbot.waitUntil(lambda: engine._running is None, timeout=5_000)  # the worker stopped the load
    assert engine.loaded is None, "the load stopped: nothing was loaded"
    assert w.controller.pair is None
    w.close()


def test_the_warm_up_after_a_load_shows_its_shapes_and_can_be_skipped(qtbot, specchat_home):
    w, engine = open_window(qtbot, specchat_home, warm_up_shapes=8, warm_up_seconds=40.0)
    w.load_pair("/models/main", "/models/draft")
    key = ("warm-up", w.controller.load_request)
    qtbot.waitUntil(lambda: "1 of 8 shapes" in w.waits.text(key), timeout=15_000)
    assert w.waits.text(key).startswith("Preparing the draft: compiling its pass shapes · 1 of 8 shapes · ")
    assert "left" in w.waits.text(key)
    row = w.waits.rows[key]
    assert row.button.text() == "Skip"
    row.button.click()
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=10_000)  # loaded, warm-up skipped
    assert w.waits.isHidden()
    w.close()


def test_an_import_shows_progress_and_cancel_stops_it(qtbot, specchat_home, tmp_path, monkeypatch):
    from app.engine.gguf import child

    stopped = threading.Event()

    def slow_import(path, cancel=None, **_kwargs):
        yield ImportProgress("tensors", 3, 30)
        while not cancel.wait(0.02):
            pass
        stopped.set()
        yield ImportFailed("the import was cancelled", kind="cancelled")

    monkeypatch.setattr(child, "run_import", slow_import)
    window, _engine = open_window(qtbot, specchat_home)
    gguf = str(tmp_path / "model.gguf")
    window.library.start_import(gguf)
    key = ("import", gguf)
    qtbot.waitUntil(
        lambda: window.waits.text(key).startswith("Importing model.gguf: converting the weights · 10%")
    )
    (row,) = window.waits.rows.values()
    assert row.button.text() == "Cancel"
    row.button.click()
    qtbot.waitUntil(stopped.is_set, timeout=5000)
    assert window.waits.isHidden()
    window.close()


def test_a_download_shows_its_time_and_estimate_and_cancel_stops_it(qtbot, tmp_path, monkeypatch):
    from app.engine.library.download import DownloadCancelled, DownloadProgress
    from app.ui.library import download_panel

    def slow_download(repo_id, *, progress, cancel, endpoint, root):
        progress(DownloadProgress(repo_id, 10_000_000, 40_000_000, 1e6))
        while not cancel.wait(0.02):
            pass
        raise DownloadCancelled()

    monkeypatch.setattr(download_panel, "download", slow_download)
    panel = download_panel.DownloadPanel(None, tmp_path)
    qtbot.addWidget(panel)
    panel.show()
    panel.enqueue(["org/toy"])
    qtbot.waitUntil(lambda: not panel.waits.isHidden(), timeout=5000)
    assert panel.waits.text("org/toy").startswith("Downloading org/toy · 25% · 0 s so far · about")
    panel.cancel_button.click()
    qtbot.waitUntil(lambda: panel.status.text() == "Cancelled org/toy; nothing was installed", timeout=5000)
    assert panel.waits.isHidden()


def test_an_offline_download_says_so_in_words_at_once(qtbot, tmp_path, monkeypatch):
    import socket

    from huggingface_hub import HfApi

    from app.ui.library import download_panel

    tries: list[object] = []

    def no_network(address, *args, **kwargs):
        tries.append(address)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(HfApi, "model_info", lambda self, repo_id, **kw: tries.append("the hub's client"))
    panel = download_panel.DownloadPanel(None, tmp_path)
    qtbot.addWidget(panel)
    panel.enqueue(["mlx-community/Qwen2.5-0.5B-Instruct-4bit"])
    qtbot.waitUntil(lambda: panel.status.text().startswith("Failed"), timeout=5000)
    assert panel.status.text() == (
        "Failed: mlx-community/Qwen2.5-0.5B-Instruct-4bit: "
        "You appear to be offline: SpecChat could not reach huggingface.co."
    )
    assert tries == [("huggingface.co", 443)]  # one quick connection attempt, no retries
    assert panel.waits.isHidden()
