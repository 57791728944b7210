"""The window with the main split across machines: it loads there, and a lost machine ends the
answer with the text kept and the pair loaded on this machine alone."""

from __future__ import annotations

from PySide6.QtCore import QSettings

from app.devtools.fake_engine import ExactClock, FakeEngine
from app.engine.protocol import LoadPair
from app.ui.common.settings import HOSTFILE_KEY
from tests.ui.test_main_window import engine, make_window, type_and_send


def _split_window(qtbot, tmp_path, lose_after: int | None = None):
    hostfile = tmp_path / "hosts.json"
    hostfile.write_text(
        '[{"ssh": "mac1.local", "ips": ["10.0.0.1"]}, {"ssh": "mac2.local", "ips": ["10.0.0.2"]}]'
    )
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    settings.setValue(HOSTFILE_KEY, str(hostfile))
    settings.sync()
    window = make_window(
        qtbot,
        tmp_path,
        engine_factory=lambda emit: FakeEngine(
            emit, rate=400, clock=ExactClock(), lose_ranks_after=lose_after
        ),
    )
    return window, hostfile


def _loads(window) -> list[LoadPair]:
    return [c for c in engine(window).commands if isinstance(c, LoadPair)]


def test_a_chosen_set_of_machines_is_where_the_main_loads(qtbot, tmp_path):
    window, hostfile = _split_window(qtbot, tmp_path)
    window.load_pair("main-model", "draft-model")
    qtbot.waitUntil(lambda: window.controller.pair is not None)
    assert _loads(window)[-1].hostfile == str(hostfile)
    assert "main split over 2 machines" in window.pair_label.text()


def test_a_lost_machine_keeps_the_text_and_reloads_on_this_machine(qtbot, tmp_path):
    window, _ = _split_window(qtbot, tmp_path, lose_after=12)
    window.load_pair("main-model", "draft-model")
    qtbot.waitUntil(lambda: window.controller.pair is not None)
    type_and_send(qtbot, window, "hello")
    qtbot.waitUntil(lambda: len(_loads(window)) == 2, timeout=5000)
    assert _loads(window)[-1].hostfile is None, "after a lost machine the pair reloads on this machine alone"
    assert _loads(window)[-1].main == "main-model", "the reload keeps the same main model"
    qtbot.waitUntil(lambda: window.controller.pair is not None and window.controller.live is None)
    assert "split" not in window.pair_label.text()
    banner = window.banner.label.text()
    assert "rank 1 (mac2.local)" in banner, "the banner names the machine that was lost"
    assert "text so far is kept" in banner, "the banner says the text so far is kept"
    answer = window.controller.transcript.turns[-1]
    # what was written stays
    assert len(answer.text) > 0, "the words written before the loss stay in the answer"
    assert answer.state.value == "error", "the cut answer is marked as an error"
    assert answer.text.replace("**", "")[:40] in window.view.toPlainText()
