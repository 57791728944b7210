"""Sampling presets: the dialog fills its fields from a preset and says "Custom" once one is edited;
the composer shows and changes the open conversation's preset, which is stored with it."""

from __future__ import annotations

import pytest

from app.engine.decoding.acceptance import AcceptanceRule
from app.engine.features.presets import CUSTOM, PRESETS
from app.engine.protocol import Generate, SpeculationMode
from app.ui.chat.settings_dialog import ChatSettings, SettingsDialog
from tests.ui.test_main_window import engine, make_window, type_and_send


def choose(combo, name: str) -> None:
    """What a user's click does: pick the item and fire `activated`."""
    index = combo.findText(name)
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def test_the_dialog_offers_named_presets_and_fills_the_fields(qtbot):
    dialog = SettingsDialog(ChatSettings())
    qtbot.addWidget(dialog)
    names = [dialog.preset.itemText(i) for i in range(dialog.preset.count())]
    assert names == ["Precise", "Balanced", "Creative", "Conservative", CUSTOM]
    assert dialog.preset.currentText() == "Precise"  # a new conversation decodes greedily
    choose(dialog.preset, "Creative")
    assert dialog.temperature.value() == 1.0, "Creative sets temperature 1.0"
    assert dialog.top_p.value() == 0.95, "Creative sets top-p 0.95"
    assert dialog.rule.currentText() == "residual", "Creative uses the residual rule"
    assert dialog.preset.currentText() == "Creative", "the preset stays Creative"
    choose(dialog.preset, "Conservative")
    assert dialog.mode.currentText() == "fixed", "Conservative drafts a fixed length"
    assert dialog.k.value() == 2, "Conservative drafts 2 tokens"
    dialog.k.setValue(3)  # an edited value is no longer the preset
    assert dialog.preset.currentText() == CUSTOM, "an edited value shows Custom"
    assert dialog.value().preset == CUSTOM, "an edited value is saved as Custom"
    dialog.k.setValue(2)
    assert dialog.preset.currentText() == "Conservative"
    assert "two tokens" in dialog.preset.itemData(3, 3)  # the tooltip explains it in words


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.name)
def test_each_preset_sends_its_exact_values(qtbot, window, preset):
    window.controller.chat_settings = ChatSettings(max_tokens=5)
    choose(window.composer.preset, preset.name)
    assert window.composer.preset.currentText() == preset.name
    type_and_send(qtbot, window, "hello")
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)
    [ask] = [c for c in engine(window).commands if isinstance(c, Generate)]
    assert (ask.sampling.temperature, ask.sampling.top_p, ask.sampling.min_p) == (
        preset.temperature,
        preset.top_p,
        preset.min_p,
    )
    assert ask.speculation.mode is SpeculationMode(preset.speculation)
    assert ask.speculation.k == preset.k
    assert ask.speculation.acceptance is AcceptanceRule(preset.acceptance)


def test_the_preset_is_per_conversation_and_survives_reopening(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    w.load_pair("/models/main", "/models/draft")
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=5000)
    choose(w.composer.preset, "Creative")
    type_and_send(qtbot, w, "first")
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    creative = w.controller.conversation
    w.controller.new_conversation()
    choose(w.composer.preset, "Conservative")
    type_and_send(qtbot, w, "second")
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=10_000)
    conservative = w.controller.conversation
    w.sidebar.selected.emit(creative)
    assert w.composer.preset.currentText() == "Creative"
    w.sidebar.selected.emit(conservative)
    assert w.composer.preset.currentText() == "Conservative"
    w.close()

    again = make_window(qtbot, specchat_home)  # a restart reads the store
    again.sidebar.selected.emit(creative)
    assert again.composer.preset.currentText() == "Creative"
    assert again.controller.chat_settings.temperature == 1.0
    again.close()


def test_a_value_edited_in_settings_shows_custom_in_the_composer(qtbot, window, monkeypatch):
    edited = ChatSettings().with_preset("Balanced")
    assert edited.preset == "Balanced"
    monkeypatch.setattr(SettingsDialog, "exec", lambda self: True)
    monkeypatch.setattr(SettingsDialog, "value", lambda self: ChatSettings(temperature=0.65))
    window.edit_settings()
    assert window.composer.preset.currentText() == CUSTOM
    choose(window.composer.preset, "Balanced")
    assert window.controller.chat_settings.temperature == 0.7
    assert window.composer.preset.currentText() == "Balanced"


def test_every_settings_field_says_in_plain_words_what_it_does(qtbot):
    from PySide6.QtWidgets import QFormLayout, QLabel

    from app.ui.chat.settings_dialog import ChatSettings, SettingsDialog

    dialog = SettingsDialog(ChatSettings())
    qtbot.addWidget(dialog)
    form = dialog.layout()
    assert isinstance(form, QFormLayout)
    fields = [form.itemAt(row, QFormLayout.ItemRole.FieldRole).widget() for row in range(form.rowCount())]
    inputs = [f for f in fields if f is not None and not isinstance(f, QLabel) and f.isEnabled()][:-1]
    assert len(inputs) >= 10, "every input of the form is checked (the buttons last excepted)"
    for field in inputs:
        assert len(field.toolTip()) > 30, f"{type(field).__name__} has no plain-words tooltip"
