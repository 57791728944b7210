"""A failed action in the window ends in a message that stays until dismissed, naming the path and
the reason, and leaves nothing stale on screen (issue 29, class 9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtWidgets import QFileDialog

from app.devtools.fake_engine import ExactClock, FakeEngine
from app.engine.decoding.events import EngineError, ErrorKind
from app.engine.library.discovery import Sources
from app.engine.protocol import Command, Generate, LoadPair
from app.engine.store.conversations import ConversationStore
from app.engine.store.transcript import Role
from app.ui.main_window import MainWindow

BROKEN = "/models/broken-main"


def failures(command: Command) -> EngineError | None:
    """One model folder fails to load and a "fail" prompt fails; the rest is the fake engine's."""
    if isinstance(command, LoadPair) and command.main == BROKEN:
        return EngineError("config.json is missing", kind=ErrorKind.LOAD)
    if isinstance(command, Generate) and command.messages[-1]["content"] == "fail":
        return EngineError("the chat template failed", kind=ErrorKind.TEMPLATE)
    return None


@pytest.fixture
def window(qtbot, specchat_home):
    models = specchat_home / "models"
    models.mkdir(parents=True)
    w = MainWindow(
        engine_factory=lambda emit: FakeEngine(emit, rate=400.0, clock=ExactClock(), refuse=failures),
        store=ConversationStore(specchat_home / "c.sqlite3"),
        settings=QSettings(str(specchat_home / "settings.ini"), QSettings.Format.IniFormat),
        sources=Sources(hub_cache=None, lmstudio=None, specchat=models, use_hub=False),
        restore_pair=False,
    )
    qtbot.addWidget(w)
    w.show()
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    yield w
    w.close()


def answered(qtbot, w: MainWindow, text: str) -> None:
    w.controller.chat_settings = w.controller.chat_settings.__class__(max_tokens=30)
    assert w.controller.send(text)
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)


def stays_until_dismissed(qtbot, w: MainWindow) -> None:
    """Visible with no timer that could hide it; gone once dismissed."""
    assert w.banner.isVisible()
    assert w.banner.findChildren(QTimer) == []
    qtbot.mouseClick(w.banner.dismiss_button, Qt.MouseButton.LeftButton)
    assert not w.banner.isVisible(), "dismissing hides the banner"
    assert w.banner.text() == "", "dismissing clears its words"


def unwritable_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    probe = folder / "probe"
    try:
        probe.write_text("x")
    except PermissionError:
        return folder
    probe.unlink()
    folder.chmod(0o700)
    pytest.skip("running as a user who can write into a read-only folder (root)")


def export_into(qtbot, monkeypatch, w: MainWindow, target: Path) -> None:
    cid = w.store.create("A chat", "", {})
    w.store.append(cid, Role.USER, "hello")
    assert w.controller.open(cid)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    action = next(a for a in w.menuBar().actions()[0].menu().actions() if a.text() == "Export as Markdown…")
    with qtbot.captureExceptions() as raised:
        action.trigger()
    assert raised == []
    assert w.error_box is not None, "a failed export opens a message box"
    assert w.error_box.isVisible(), "the message box is shown"
    assert str(target) in w.error_box.text()


def test_export_to_a_read_only_folder_says_so(qtbot, monkeypatch, window, tmp_path):
    folder = unwritable_folder(tmp_path)
    try:
        export_into(qtbot, monkeypatch, window, folder / "chat.md")
        assert "permission" in window.error_box.text()
    finally:
        folder.chmod(0o700)


def test_export_under_a_file_says_so(qtbot, monkeypatch, window, tmp_path):
    """The same failure whoever runs the tests: a file stands where the folder should be."""
    (tmp_path / "notes").write_text("a file, not a folder")
    export_into(qtbot, monkeypatch, window, tmp_path / "notes" / "chat.md")
    assert "is a file, not a folder" in window.error_box.text()


def test_report_export_failure_is_a_message(qtbot, window, tmp_path):
    (tmp_path / "notes").write_text("a file, not a folder")
    with qtbot.captureExceptions() as raised:
        assert window.dashboard.export_to(tmp_path / "notes" / "report") is None
    assert raised == []
    box = window.dashboard.error_box
    assert box is not None, "a failed report export opens a message box"
    assert box.isVisible(), "the message box is shown"
    assert str(tmp_path / "notes" / "report") in box.text(), "the message names the report's folder"


def test_load_error_stays_and_clears_stale_stats(qtbot, window):
    answered(qtbot, window, "hello")
    window.dashboard.follow(window.controller.transcript.last_answer().key)  # charts shown
    assert "tok/s" in window.strip.text()
    window.load_pair(BROKEN, "/models/draft")
    qtbot.waitUntil(lambda: window.controller.load_request is None, timeout=5000)
    assert window.controller.pair is None
    text = window.banner.text()
    assert BROKEN in text, "the banner names the folder that failed"
    assert "config.json is missing" in text, "the banner gives the reason"
    strip = window.strip.text()
    assert strip == "No model loaded", strip  # no speed, acceptance or speedup of the old pair
    assert window.dashboard.request is None, "the dashboard follows no answer after a failed load"
    assert window.dashboard.summary.text() == "No generation yet.", (
        "the dashboard says there is no generation yet"
    )
    stays_until_dismissed(qtbot, window)


def test_generation_error_stays(qtbot, window):
    window.controller.chat_settings = window.controller.chat_settings.__class__(max_tokens=30)
    assert window.controller.send("fail")
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=5000)
    assert "the chat template failed" in window.banner.text()
    stays_until_dismissed(qtbot, window)


def test_import_error_stays(qtbot, window, tmp_path):
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"not a gguf file at all")
    window.library.start_import(str(bogus))
    qtbot.waitUntil(lambda: window.banner.isVisible(), timeout=10_000)
    assert str(bogus) in window.banner.text()
    assert "this is not a GGUF model file SpecChat can read" in window.banner.text()
    assert window.banner.details_button.isVisible()  # the parser's own words, one click away
    stays_until_dismissed(qtbot, window)


def test_download_error_outlives_the_picker(qtbot, window):
    dialog = window.picker()
    dialog.downloads.enqueue(["not a repo id"])
    qtbot.waitUntil(lambda: window.banner.isVisible(), timeout=10_000)
    assert "not a repo id" in window.banner.text()
    assert "not a repo id" in dialog.downloads.status.text()
    dialog.close()
    stays_until_dismissed(qtbot, window)


def test_banner_keeps_the_newest_few(qtbot, window):
    for n in range(10):
        window.report_error(f"failure {n}")
    window.report_error("failure 9")
    assert window.banner.text().splitlines() == [f"failure {n}" for n in range(6, 10)]


def test_reason_in_words():
    from app.ui.common.error_banner import reason

    assert reason(PermissionError(13, "Permission denied")) == "you do not have permission to write there"
    assert reason(OSError(28, "No space left on device")) == "the disk is full"
    assert reason(OSError(5, "Input/output error")) == "input/output error"
    assert reason(ValueError("bad")) == "bad"
