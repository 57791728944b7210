"""Screenshots of the sampling presets (the settings dialog and the combo next to Send) and of a
refused draft told on hover, against the synthetic engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEvent, QPoint
from PySide6.QtGui import QHelpEvent, QPainter, QTextCursor
from PySide6.QtWidgets import QApplication, QWidget

Wait = Callable[..., bool]
Save = Callable[[QApplication, QWidget, Path], Path]

WORDS = ["Otters", " hold", " hands", " while", " they", " sleep,", " so", " they", " stay", " together."]


def render_presets(app: QApplication, home: Path, out: Path, wait: Wait, save: Save) -> None:
    from app.devtools.fake_engine import FakeEngine
    from app.devtools.fake_window import fake_window
    from app.ui.chat.settings_dialog import ChatSettings, SettingsDialog

    dialog = SettingsDialog(ChatSettings().with_preset("Creative"))
    dialog.show()
    save(app, dialog, out / "settings-preset-creative.png")
    dialog.k.setValue(6)  # an edited value: the preset reads Custom
    save(app, dialog, out / "settings-preset-custom.png")
    dialog.close()

    window = fake_window(home / "presets", lambda emit: FakeEngine(emit, rate=200.0, script=WORDS))
    window.load_pair("/models/Qwen2.5-7B-Instruct-4bit", "/models/Qwen2.5-0.5B-Instruct-4bit")
    wait(app, lambda: window.controller.pair is not None, 10)
    window.presets.choose("Conservative")
    window.controller.chat_settings = window.controller.chat_settings.__class__(
        **{**window.controller.chat_settings.to_dict(), "max_tokens": len(WORDS)}
    )
    window.toggles.rejected.setChecked(True)
    window.controller.send("Tell me about otters")
    wait(app, lambda: not window.controller.busy, 30)
    save(app, window.composer, out / "composer-preset.png")
    _hover_shot(app, window, out / "refused-draft-on-hover.png", save)
    window.close()


def _hover_shot(app: QApplication, window: QWidget, path: Path, save: Save) -> None:
    """The transcript with the tooltip Qt shows over a word of a round with a refused draft, drawn
    onto one picture (a tooltip is a window of its own)."""
    from app.ui.main_window import MainWindow

    assert isinstance(window, MainWindow)
    view = window.view
    turn = window.controller.transcript.last_answer()
    if turn is None or not turn.answer.rejected:
        save(app, view, path)
        return
    at = min(turn.answer.rejected[0][0], len(turn.answer.parts) - 1)
    span = view.token_range(turn.key, at)
    cursor = QTextCursor(view.document())
    cursor.setPosition(span[0] if span else 0)
    point = view.cursorRect(cursor).center() + QPoint(2, 0)
    QApplication.sendEvent(
        view.viewport(), QHelpEvent(QEvent.Type.ToolTip, point, view.viewport().mapToGlobal(point))
    )
    app.processEvents()
    picture = view.grab()
    tips = [w for w in app.topLevelWidgets() if w.objectName() == "qtooltip_label" and w.isVisible()]
    if tips:
        painter = QPainter(picture)
        painter.drawPixmap(view.viewport().mapTo(view, point) + QPoint(8, 16), tips[0].grab())
        painter.end()
    if not picture.save(str(path)):
        raise OSError(f"could not write {path}")
    print(path)
