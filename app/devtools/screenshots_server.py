"""Screenshots of the Server switch on (its address in the status bar, the log pane with a few
served requests) and of its settings letting the network in. The server really listens (on 8080 or the next free port); the rows are fed
straight to the pane, so the picture does not wait on a served answer."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QApplication, QWidget

Wait = Callable[..., bool]
Save = Callable[[QApplication, QWidget, Path], Path]

# (seconds ago, endpoint, prompt tokens, tokens, tok/s, speedup, finish, status)
ROWS = (
    (95, "/v1/chat/completions", 412, 256, 48.2, 1.84, "stop", 200),
    (71, "/v1/chat/completions", 690, 180, 51.7, 1.97, "stop", 200),
    (40, "/v1/completions", 35, 64, 44.9, 1.62, "length", 200),
    (22, "/v1/chat/completions", 702, 23, 39.5, None, "cancelled", 200),
    (5, "/v1/chat/completions", 0, 0, 0.0, None, "error", 429),
)


def render_server(app: QApplication, home: Path, out: Path, wait: Wait, save: Save) -> None:
    from app.devtools.fake_engine import FakeEngine
    from app.devtools.fake_window import fake_window
    from app.server.records import ServedRecord
    from app.ui.chat.settings_dialog import ChatSettings

    window = fake_window(home / "server", lambda emit: FakeEngine(emit, rate=120.0))
    window.load_pair("/models/Qwen2.5-7B-Instruct-4bit", "/models/Qwen2.5-0.5B-Instruct-4bit")
    wait(app, lambda: window.controller.pair is not None, 10)
    window.controller.chat_settings = ChatSettings(max_tokens=60)
    window.controller.send("How does speculative decoding work?")
    wait(app, lambda: not window.controller.busy, 30)
    window.serving.start()
    now = time.time()
    for ago, endpoint, prompt, tokens, speed, speedup, finish, status in ROWS:
        window.serving.served.emit(
            ServedRecord(
                now - ago,
                "127.0.0.1",
                endpoint,
                prompt,
                tokens,
                speed,
                speedup,
                int(tokens * 0.6),
                int(tokens * 0.8),
                finish,
                "Speculative decoding lets a small draft model guess the next tokens.",
                status=status,
            )
        )
    wait(app, lambda: window.serving.log.table.rowCount() == len(ROWS), 5)
    window.statusBar().clearMessage()
    window.resize(1180, 860)
    save(app, window, out / "server-on-with-log.png")
    window.serving.stop()
    window.close()

    from app.ui.server.server_dialog import ServerDialog, ServerPlace

    dialog = ServerDialog(ServerPlace(), "kP3x-example-key-shown-in-the-window")  # never a real key
    dialog.show()
    dialog.network.setChecked(True)
    save(app, dialog, out / "server-settings-network.png")
    dialog.close()
