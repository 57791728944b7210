"""Waits that move and a Stop that stops: reading the prompt shows its time, a new load stops
the answer and says what it waits for, a Stop leaves the worker quiet, and a pair that did not
finish loading is offered at the next start instead of being loaded again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt

from app.devtools.fake_engine import ExactClock, FakeEngine
from app.engine.decoding.events import EngineError, ErrorKind
from app.engine.library.discovery import Sources
from app.engine.protocol import Command, LoadPair, MeasureBaseline
from app.engine.store.conversations import ConversationStore
from app.engine.store.transcript import MessageState
from app.ui.main_window import MainWindow


def broken_loads(command: Command) -> EngineError | None:
    """A model folder named "broken" fails to load; the rest is the fake engine's."""
    if isinstance(command, LoadPair) and Path(command.main).name == "broken":
        return EngineError("config.json is missing", kind=ErrorKind.LOAD)
    return None


def open_window(qtbot, home: Path, restore: bool = True, **engine) -> MainWindow:
    """The window over `home`'s settings and history, as the app starts it (the pair restored)."""
    models = home / "models"
    models.mkdir(parents=True, exist_ok=True)
    w = MainWindow(
        engine_factory=lambda emit: FakeEngine(
            emit, rate=300.0, clock=ExactClock(), refuse=broken_loads, **engine
        ),
        store=ConversationStore(home / "c.sqlite3"),
        settings=QSettings(str(home / "settings.ini"), QSettings.Format.IniFormat),
        sources=Sources(hub_cache=None, lmstudio=None, specchat=models, use_hub=False),
        restore_pair=restore,
    )
    qtbot.addWidget(w)
    w.show()
    return w


def loads(w: MainWindow) -> list[str]:
    return [c.main for c in w.bridge.engine.commands if isinstance(c, LoadPair)]  # type: ignore[attr-defined]


@pytest.fixture
def folders(specchat_home) -> tuple[str, str]:
    good, broken = specchat_home / "models" / "good", specchat_home / "models" / "broken"
    good.mkdir(parents=True)
    broken.mkdir()
    return str(good), str(broken)


def test_a_pair_that_failed_to_load_is_offered_at_the_next_start_not_loaded(qtbot, specchat_home, folders):
    good, broken = folders
    w = open_window(qtbot, specchat_home)
    w.load_pair(good, None)
    qtbot.waitUntil(lambda: w.controller.pair == (good, None), timeout=5000)
    w.load_pair(broken, None)
    qtbot.waitUntil(lambda: "Could not load" in w.banner.text(), timeout=5000)
    w.close()

    again = open_window(qtbot, specchat_home)
    qtbot.wait(300)
    assert loads(again) == [], "the unfinished pair is not loaded again at start"
    assert again.controller.load_request is None, "no load is under way"
    assert again.last_load.isVisible()
    assert again.last_load.label.text() == "Last time loading broken did not finish. Load it again?"
    again.last_load.again.click()
    qtbot.waitUntil(lambda: loads(again) == [broken], timeout=5000)
    assert not again.last_load.isVisible()
    again.close()


def test_a_pair_that_loaded_is_loaded_again_at_start(qtbot, specchat_home, folders):
    good, _broken = folders
    w = open_window(qtbot, specchat_home)
    w.load_pair(good, None, "lookup")
    qtbot.waitUntil(lambda: w.controller.pair == (good, None), timeout=5000)
    w.close()
    again = open_window(qtbot, specchat_home)
    qtbot.waitUntil(lambda: again.controller.pair == (good, None), timeout=5000)
    assert loads(again) == [good], "the pair that loaded is loaded again"
    assert not again.last_load.isVisible(), "no offer to load the last pair again"
    assert again.controller.mode_override == "lookup"
    again.close()


def test_a_cancelled_load_is_offered_and_dismissing_forgets_it(qtbot, specchat_home, folders):
    good, _broken = folders
    w = open_window(qtbot, specchat_home, load_seconds=1.5)
    w.load_pair(good, None)
    qtbot.waitUntil(lambda: not w.waits.isHidden(), timeout=5000)
    (row,) = w.waits.rows.values()
    row.button.click()
    assert w.pair_label.text() == "Loading cancelled"
    w.close()

    again = open_window(qtbot, specchat_home, load_seconds=1.5)
    qtbot.wait(300)
    assert loads(again) == [], "a cancelled load is not loaded again at start"
    assert again.last_load.isVisible(), "it is offered instead"
    again.last_load.dismiss.click()
    again.close()
    third = open_window(qtbot, specchat_home)
    qtbot.wait(300)
    assert loads(third) == [], "a dismissed offer loads nothing"
    assert not third.last_load.isVisible(), "a dismissed offer does not come back"
    third.close()


def test_esc_cancels_a_load_under_way(qtbot, specchat_home, folders):
    good, _broken = folders
    w = open_window(qtbot, specchat_home, load_seconds=1.5)
    w.load_pair(good, None)
    qtbot.waitUntil(lambda: not w.waits.isHidden(), timeout=5000)
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Escape)
    assert w.pair_label.text() == "Loading cancelled", "Esc cancels the load as its Cancel button does"
    assert w.controller.load_request is None
    assert w.controller.pair is None, "nothing is loaded"
    w.close()


def test_reading_the_prompt_shows_its_time_and_a_load_stops_it_saying_so(qtbot, specchat_home):
    """A load asked for while the prompt is read stops the answer within a chunk; until the
    worker has stopped, the wait says it is stopping, not loading."""
    w = open_window(
        qtbot,
        specchat_home,
        restore=False,
        prefill_chunks=4,
        prefill_seconds=8.0,
        prompt_tokens=4096,
        load_seconds=1.0,
    )
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    waits: list[str] = []
    w.waits.changed.connect(lambda _key, text: waits.append(text))
    assert w.controller.send("Explain speculative decoding")
    state = w.strip.labels["state"]
    qtbot.waitUntil(lambda: "1,024/4,096" in state.text(), timeout=8000)
    assert re.fullmatch(r"Reading prompt 1,024/4,096 · 2 s", state.text()), state.text()

    w.load_pair("/models/other", None)
    assert w.controller.transcript.last_answer().state is MessageState.CANCELLED
    qtbot.waitUntil(lambda: w.controller.pair == ("/models/other", None), timeout=8000)
    stopping = [t for t in waits if t.startswith("Stopping the current work, then loading other")]
    loading = [t for t in waits if t.startswith("Loading other")]
    assert stopping, "the wait says it stops the answer first"
    assert loading, "the wait then says it loads"
    assert waits.index(stopping[0]) < waits.index(loading[0]), "stopping is said before loading"
    assert "left" not in stopping[-1]  # no estimate is made up for the stop
    w.close()


def test_a_stopped_answer_leaves_the_worker_quiet(qtbot, specchat_home):
    """No plain-speed measurement starts after a Stop (a finished answer would start one)."""
    w = open_window(qtbot, specchat_home, restore=False)
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    engine = w.bridge.engine
    engine.rate = 20.0  # type: ignore[attr-defined]
    w.controller.chat_settings = w.controller.chat_settings.__class__(max_tokens=400)
    assert w.controller.send("Tell a long story")
    qtbot.waitUntil(
        lambda: w.controller.live is not None and w.controller.live.stats.tokens > 3, timeout=5000
    )
    w.controller.stop()
    qtbot.wait(800)
    assert not any(isinstance(c, MeasureBaseline) for c in engine.commands)  # type: ignore[attr-defined]

    engine.rate = 2000.0  # type: ignore[attr-defined]
    w.controller.chat_settings = w.controller.chat_settings.__class__(max_tokens=40)
    assert w.controller.send("Now a short one")
    qtbot.waitUntil(lambda: any(isinstance(c, MeasureBaseline) for c in engine.commands), timeout=5000)  # type: ignore[attr-defined]
    w.close()


def test_a_load_asked_for_during_another_stops_it_and_loads_at_once(qtbot, specchat_home):
    w = open_window(qtbot, specchat_home, restore=False, load_seconds=2.0)
    waits: list[str] = []
    w.waits.changed.connect(lambda _key, text: waits.append(text))
    w.load_pair("/models/first", None)
    qtbot.wait(300)
    w.load_pair("/models/second", None)
    qtbot.waitUntil(lambda: w.controller.pair == ("/models/second", None), timeout=10_000)
    assert not any(t.startswith("Waiting for the models already loading") for t in waits), (
        "the second load does not wait for the first: that one stops"
    )
    assert any(t.startswith("Loading second") for t in waits)
    w.close()
