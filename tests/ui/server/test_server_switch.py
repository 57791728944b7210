"""The window's Server switch: a real local server over the window's own (synthetic) engine."""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtWidgets import QApplication

from app.server.records import ServedRecord
from app.ui.chat.chat_view import ChatView
from app.ui.server import server_dialog
from app.ui.server.server_dialog import EVERYWHERE, ServerDialog, ServerPlace, read_place
from app.ui.server.server_log import ServerLog
from tests.ui.test_main_window import make_window


def _left() -> Qt.MouseButton:
    return Qt.MouseButton.LeftButton


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


class Call:
    """An HTTP request on a helper thread, so the test's thread keeps running the Qt loop."""

    def __init__(self, url: str, body: dict[str, Any] | None = None) -> None:
        self.status: int | None = None
        self.reply: dict[str, Any] = {}
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        self.thread = threading.Thread(target=self._run, args=(request,), daemon=True)
        self.thread.start()

    def _run(self, request: urllib.request.Request) -> None:
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        self.reply = json.loads(raw)
        self.status = status

    @property
    def done(self) -> bool:
        return self.status is not None


def chat(url: str, text: str = "Hello from another program", max_tokens: int = 12) -> Call:
    body = {"model": "main", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}
    return Call(f"{url}/chat/completions", body)


@pytest.fixture
def port(window) -> int:
    """A free loopback port, chosen in the window's server settings."""
    chosen = free_port()
    window.settings.setValue(server_dialog.PORT, chosen)
    return chosen


@pytest.fixture
def empty_clipboard() -> Iterator[None]:
    yield
    QApplication.clipboard().clear()  # mime data left there is freed after Python at Qt's exit


def test_switch_serves_the_windows_pair_without_touching_the_chat(qtbot, window, port, empty_clipboard):
    serving = window.serving
    models = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Models")
    assert serving.action in models.actions(), "the Models menu has the server switch"
    assert serving.action.shortcut().toString() == "Ctrl+Shift+E", "the switch's shortcut is Ctrl+Shift+E"
    assert serving.log.isHidden()  # hidden until the server is first turned on
    qtbot.mouseClick(serving.bar.toggle, _left())
    url = f"http://127.0.0.1:{port}/v1"
    assert serving.action.isChecked(), "the menu's switch shows the server is on"
    assert serving.bar.toggle.isChecked(), "the bar's switch shows the server is on"
    assert serving.bar.address.text() == f"Serving at {url}", "the bar gives the address to use"
    assert serving.bar.toggle.text() == "● Server on", "the bar's switch says the server is on"
    assert serving.log.isVisible()
    ticks: list[int] = []
    timer = QTimer(interval=10)
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start()
    call = chat(url, max_tokens=60)  # 0.2 s of tokens at the fake engine's 300 tok/s
    qtbot.waitUntil(lambda: call.done, timeout=15_000)
    timer.stop()
    assert len(ticks) > 3  # the window kept handling events while the request was served
    assert call.status == 200, call.reply
    assert call.reply["choices"][0]["message"]["content"]
    assert call.reply["usage"]["completion_tokens"] == 60
    qtbot.waitUntil(lambda: serving.log.table.rowCount() == 1, timeout=5000)
    when, client, endpoint, tokens, _speed, speedup, result = serving.log.row(0)
    assert (client, endpoint, tokens) == ("127.0.0.1", "/v1/chat/completions", "60")
    # no plain speed measured here
    assert result.startswith("finished"), "the log says the request finished"
    assert speedup == "—", "the log shows no speedup without a plain speed"
    assert len(window.controller.transcript) == 0, "a served request adds nothing to the chat"
    assert window.controller.conversation is None, "a served request opens no conversation"
    assert "Hello from another program" not in window.view.toPlainText()
    assert not window.controller.busy
    qtbot.mouseClick(serving.bar.copy, _left())
    assert QApplication.clipboard().text() == url
    serving.action.trigger()  # the menu's switch: off
    assert not serving.bar.toggle.isChecked(), "the bar's switch shows the server is off"
    assert serving.bar.address.isHidden(), "the address is hidden once off"
    assert refused(port)  # stopping frees the port
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
    assert window.settings.value(server_dialog.ON, type=bool) is False


def test_a_taken_port_is_said_in_words(qtbot, window, port):
    with socket.socket() as other:
        other.bind(("127.0.0.1", port))
        other.listen()
        window.serving.action.trigger()
        assert not window.serving.action.isChecked(), "a taken port leaves the switch off"
        assert window.serving.runner is None, "a taken port starts no server"
        words = window.banner.text()
        assert f"port {port}" in words, "the banner names the taken port"
        assert "in use by another program" in words, "the banner says another program uses it"


def test_the_default_port_moves_to_the_next_free_one_and_says_so(qtbot, window, monkeypatch):
    start = free_port()
    monkeypatch.setattr(server_dialog, "DEFAULT_PORT", start)
    with socket.socket() as other:
        other.bind(("127.0.0.1", start))
        other.listen()
        assert window.serving.start()
        try:
            served_on = window.serving.runner.address[1]
            assert served_on > start
            assert f"Port {start} is taken" in window.statusBar().currentMessage()
            assert f"port {served_on}" in window.statusBar().currentMessage()
        finally:
            window.serving.stop()


def test_no_pair_is_answered_in_words_and_a_loaded_pair_is_served(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    port = free_port()
    w.settings.setValue(server_dialog.PORT, port)
    w.serving.action.trigger()
    try:
        call = chat(f"http://127.0.0.1:{port}/v1")
        qtbot.waitUntil(lambda: call.done, timeout=15_000)
        assert call.status == 503
        assert "no model" in call.reply["error"]["message"].lower()
        w.load_pair("/models/main", "/models/draft")
        qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
        call = chat(f"http://127.0.0.1:{port}/v1")
        qtbot.waitUntil(lambda: call.done, timeout=15_000)
        assert call.status == 200, call.reply
    finally:
        w.close()
    assert refused(port)  # closing the window stops the server


def test_serving_again_after_a_restart_waits_for_the_pair(qtbot, specchat_home):
    port = free_port()
    settings = QSettings(str(specchat_home / "settings.ini"), QSettings.Format.IniFormat)
    settings.setValue(server_dialog.PORT, port)
    settings.setValue(server_dialog.ON, True)  # it served when the app last quit
    settings.sync()
    w = make_window(qtbot, specchat_home)
    try:
        # no models yet: nothing to serve
        assert w.serving.runner is None, "with no pair yet no server runs"
        assert refused(port), "with no pair yet the port is closed"
        w.load_pair("/models/main", "/models/draft")
        qtbot.waitUntil(lambda: w.serving.runner is not None, timeout=5000)
        assert w.serving.bar.address.text() == f"Serving at http://127.0.0.1:{port}/v1"
    finally:
        w.close()
    assert w.settings.value(server_dialog.ON, type=bool) is True  # quitting is not switching off


def record(**changes: Any) -> ServedRecord:
    values: dict[str, Any] = dict(
        time=0.0,
        client="127.0.0.1",
        endpoint="/v1/completions",
        prompt_tokens=9,
        tokens=40,
        tokens_per_second=52.5,
        speedup_vs_plain=1.83,
        accepted=30,
        proposed=44,
        finish_reason="stop",
        text="The answer, **in bold**.",
    )
    values.update(changes)
    return ServedRecord(**values)


def test_log_rows_say_what_was_served_and_open_the_answer(qtbot):
    log = ServerLog()
    qtbot.addWidget(log)
    log.add(record())
    log.add(record(finish_reason="cancelled", speedup_vs_plain=None, tokens=3, tokens_per_second=0.0))
    log.add(record(status=429, finish_reason="error", tokens=0, tokens_per_second=0.0))
    assert log.row(0)[3:] == ("40", "52.5", "1.83×", "finished")
    assert log.row(1)[3:] == ("3", "—", "—", "cancelled")
    assert log.row(2)[6] == "turned away: too many waiting (429)"
    log.table.cellDoubleClicked.emit(0, 2)
    dialog = log.answer_view
    assert dialog is not None, "double-clicking a row opens its answer"
    assert dialog.isVisible(), "the answer's window is shown"
    qtbot.addWidget(dialog)
    view = dialog.findChild(ChatView)
    assert view is not None, "the answer's window shows it as chat text"
    assert "The answer, in bold." in view.toPlainText(), (
        "the answer reads as rendered, without markdown marks"
    )


def test_the_network_needs_a_key_shown_with_a_warning(qtbot, tmp_path, empty_clipboard):
    dialog = ServerDialog(ServerPlace(), None)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.key.isHidden(), "serving on this computer only needs no key"
    assert dialog.warning.isHidden(), "serving on this computer only shows no warning"
    dialog.network.setChecked(True)
    assert dialog.key.isVisible(), "serving on the network shows the key"
    assert "Other computers on your network" in dialog.warning.text(), (
        "the warning says other computers can reach it"
    )
    assert len(dialog.key.text()) >= 24
    qtbot.mouseClick(dialog.copy, _left())
    assert QApplication.clipboard().text() == dialog.key.text()
    place = dialog.value()
    assert place.host == EVERYWHERE, "the network choice listens everywhere"
    assert place.api_key == dialog.key.text(), "the server asks for the key shown"
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    settings.setValue(server_dialog.NETWORK, True)  # a network wanted with no key kept
    settings.remove(server_dialog.KEY)
    assert not read_place(settings).network  # is never opened
