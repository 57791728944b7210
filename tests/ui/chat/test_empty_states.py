"""Every empty state says what to do next, with a button that does it; words match the platform."""

from __future__ import annotations

import shutil
import sys

from PySide6.QtCore import Qt

from app.ui.chat.empty_states import LOADING, NEW_CHAT, NO_PAIR
from app.ui.common.platform_words import this_machine
from app.ui.library.welcome import WelcomePanel
from tests.ui.test_main_window import make_window


def test_platform_words_name_a_mac_only_on_macos(qtbot, monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    assert this_machine() == "this computer"
    panel = WelcomePanel()
    qtbot.addWidget(panel)
    assert "this computer" in panel.intro.text(), "away from a Mac the welcome says 'this computer'"
    assert "Mac" not in panel.intro.text(), "away from a Mac the welcome never says 'Mac'"
    monkeypatch.setattr(sys, "platform", "darwin")
    panel = WelcomePanel()
    qtbot.addWidget(panel)
    assert "No models were found on this Mac" in panel.intro.text()


def test_no_models_welcome_buttons_ask_for_an_import_a_folder_or_the_picker(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    qtbot.waitUntil(lambda: w.stack.currentWidget() is w.welcome, timeout=10_000)
    asked = []
    w.library.import_gguf = lambda: asked.append("import")  # the file dialogs would block the test
    w.library.add_folder = lambda: asked.append("folder")
    w.welcome.import_gguf.disconnect()
    w.welcome.add_folder.disconnect()
    w.welcome.import_gguf.connect(w.library.import_gguf)
    w.welcome.add_folder.connect(w.library.add_folder)
    buttons = {b.text(): b for b in w.welcome.findChildren(type(w.welcome.buttons[0]))}
    qtbot.mouseClick(buttons["Import GGUF…"], Qt.MouseButton.LeftButton)
    qtbot.mouseClick(buttons["Add a folder…"], Qt.MouseButton.LeftButton)
    assert asked == ["import", "folder"]
    w.close()


def _window_with_models(qtbot, home, toy_models):
    models = home / "models"
    shutil.copytree(toy_models.main, models / "toy-main")
    w = make_window(qtbot, home, models=models)
    qtbot.waitUntil(lambda: w.library.has_models, timeout=10_000)
    return w


def test_models_but_none_loaded_shows_a_choose_models_button_that_opens_the_picker(
    qtbot, specchat_home, toy_models, monkeypatch
):
    w = _window_with_models(qtbot, specchat_home, toy_models)
    assert w.stack.currentWidget() is w.empty, "with models but no pair the window shows the empty card"
    assert w.empty.state == NO_PAIR, "the card asks for a pair"
    assert w.empty.button.isVisible(), "the card shows its button"
    assert "Choose models" in w.empty.button.text(), "the button says Choose models"
    opened = []
    monkeypatch.setattr(type(w), "picker", lambda self: opened.append(1) or _Closed())
    qtbot.mouseClick(w.empty.button, Qt.MouseButton.LeftButton)
    assert opened == [1]
    w.close()


def test_sending_with_no_model_keeps_the_text_and_shows_a_choose_models_prompt(
    qtbot, specchat_home, toy_models, monkeypatch
):
    w = _window_with_models(qtbot, specchat_home, toy_models)
    assert w.need_models.isHidden()
    w.composer.editor.setPlainText("What is a draft model?")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    assert w.composer.editor.toPlainText() == "What is a draft model?"
    assert w.need_models.isVisible(), "sending with no pair says models are needed"
    assert w.need_models.button.isVisible(), "it offers a button to choose them"
    opened = []
    monkeypatch.setattr(type(w), "picker", lambda self: opened.append(1) or _Closed())
    qtbot.mouseClick(w.need_models.button, Qt.MouseButton.LeftButton)
    assert opened == [1]
    w.load_pair("/models/main", "/models/draft")  # the fake engine loads any pair
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    assert w.need_models.isHidden()
    w.close()


def test_a_loaded_pair_with_no_conversation_shows_a_hint_until_the_first_message(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    assert w.stack.currentWidget() is w.empty, "a loaded pair with no chat shows the empty card"
    assert w.empty.state == NEW_CHAT, "the card is the new-chat hint"
    assert "Type a message" in w.empty.body.text(), "the hint says to type a message"
    assert not w.empty.button.isVisible(), "the hint has no button"
    qtbot.waitUntil(lambda: w.empty.body.width() > 100)
    body = w.empty.body  # the whole hint is shown, none of it cut by the card
    assert body.height() >= body.heightForWidth(body.width())
    w.composer.editor.setPlainText("Hello")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: w.stack.currentWidget() is w.view, timeout=5000)
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    w.controller.new_conversation()
    assert w.stack.currentWidget() is w.empty
    w.close()


class _Closed:
    """A picker the user closed at once."""

    picked = None

    def exec(self) -> int:
        return 0


def test_sending_while_the_models_load_says_so_and_keeps_the_text(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    w.controller.load_request = 999  # a load under way that has not answered yet
    w.show_pane()
    assert w.stack.currentWidget() is w.empty, "while loading the window shows the empty card"
    assert w.empty.state == LOADING, "the card says the models are loading"
    w.composer.editor.setPlainText("Hi")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    assert w.composer.editor.toPlainText() == "Hi", "the text typed stays in the composer"
    assert w.need_models.isHidden(), "no 'choose models' prompt while loading"
    assert "still loading" in w.statusBar().currentMessage()
    w.close()


def test_the_welcome_suggests_pairs_at_the_precision_this_device_runs_fast(qtbot, monkeypatch):
    """On a CPU a 4-bit 7B pair would write about a word a second: 16-bit small pairs instead."""
    from app.engine.library import precision

    monkeypatch.setattr(precision, "mlx_on_gpu", lambda: False)
    panel = WelcomePanel()
    qtbot.addWidget(panel)
    cpu = [pair for _label, pair in panel.cards]
    assert cpu, "the CPU welcome suggests pairs"
    not_16_bit = [r for p in cpu for r in (p.main_repo, p.draft_repo) if not r.endswith("-bf16")]
    assert not_16_bit == [], "on a CPU every suggested model is 16-bit"
    monkeypatch.setattr(precision, "mlx_on_gpu", lambda: True)
    panel = WelcomePanel()
    qtbot.addWidget(panel)
    gpu = [pair for _label, pair in panel.cards]
    assert gpu, "the GPU welcome suggests pairs"
    assert [p.main_repo for p in gpu if not p.main_repo.endswith("-4bit")] == [], (
        "on a GPU every suggested main is 4-bit"
    )
