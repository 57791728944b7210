"""A model that will not load is said in plain words; the technical account waits behind Details."""

from __future__ import annotations

import shutil

from PySide6.QtCore import QSettings, Qt

from app.engine.library.discovery import Sources
from app.engine.store.conversations import ConversationStore
from app.ui.common.error_banner import ErrorBanner
from app.ui.main_window import MainWindow


def test_details_toggle_shows_and_hides_the_technical_account(qtbot):
    banner = ErrorBanner()
    qtbot.addWidget(banner)
    banner.show()
    banner.show_error("Could not export the conversation: the disk is full.")
    assert banner.details_button.isHidden()  # nothing technical to show
    banner.show_error("Could not load x: this is not a model file", "x/model.safetensors: header length 7")
    assert banner.details_button.isVisible(), "technical details can be shown"
    assert banner.detail_label.isHidden(), "technical details start hidden"
    qtbot.mouseClick(banner.details_button, Qt.MouseButton.LeftButton)
    assert banner.detail_label.isVisible(), "Details shows the technical account"
    assert banner.detail_label.text() == "x/model.safetensors: header length 7", (
        "the technical account is the loader's words"
    )
    assert banner.details_button.text() == "Hide details"
    qtbot.mouseClick(banner.details_button, Qt.MouseButton.LeftButton)
    assert banner.detail_label.isHidden()
    qtbot.mouseClick(banner.dismiss_button, Qt.MouseButton.LeftButton)
    assert not banner.isVisible(), "Dismiss hides the banner"
    assert banner.details == {}, "Dismiss forgets the details"


def test_a_folder_that_is_not_a_model_is_said_in_plain_words(qtbot, specchat_home, toy_models, tmp_path):
    """The real worker loads a folder whose weights file is a photo renamed: the loader's header
    length is never the headline."""
    fake = tmp_path / "not-a-model"
    shutil.copytree(toy_models.main, fake)
    (fake / "model.safetensors").write_bytes(b"\xff\xd8\xff\xe0" + bytes(range(256)) * 64)  # a JPEG
    w = MainWindow(
        store=ConversationStore(specchat_home / "c.sqlite3"),
        settings=QSettings(str(specchat_home / "s.ini"), QSettings.Format.IniFormat),
        sources=Sources(None, None, specchat_home / "models", use_hub=False),
        restore_pair=False,
    )
    qtbot.addWidget(w)
    w.show()
    w.load_pair(str(fake), None)
    qtbot.waitUntil(lambda: w.banner.isVisible(), timeout=60_000)
    headline = w.banner.label.text()
    assert f"Could not load {fake}: this is not a model file SpecChat can read" in headline
    assert "header length" not in headline, "the headline skips the technical detail"
    assert "header length" not in w.pair_label.text(), "the pair label skips the technical detail"
    assert "this is not a model file SpecChat can read" in w.pair_label.text()
    assert w.banner.details_button.isVisible(), "technical details can be shown"
    assert not w.banner.detail_label.isVisible(), "technical details start hidden"
    qtbot.mouseClick(w.banner.details_button, Qt.MouseButton.LeftButton)
    assert "model.safetensors: not a safetensors file (header length" in w.banner.detail_label.text()
    w.close()
