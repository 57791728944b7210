"""Preset names for stored settings values: the same decoding gets the same name, anything else is Custom."""

from __future__ import annotations

from app.engine.features.presets import CUSTOM, PRESETS, matching, preset_named


def test_each_preset_is_recognised_from_its_own_values():
    for preset in PRESETS:
        assert matching(preset.values()) == preset.name
        assert preset_named(preset.name) is preset
    assert preset_named("Turbo") is None


def test_auto_acceptance_and_spin_box_rounding_match_the_same_preset():
    precise = preset_named("Precise")
    assert precise is not None
    assert matching({**precise.values(), "acceptance": "auto"}) == "Precise"  # auto is exact when greedy
    creative = preset_named("Creative")
    assert creative is not None
    assert matching({**creative.values(), "acceptance": "auto", "temperature": 1.0000001}) == "Creative"


def test_any_edited_value_is_custom():
    balanced = preset_named("Balanced")
    assert balanced is not None
    for key, value in (
        ("temperature", 0.8),
        ("top_p", 0.5),
        ("min_p", 0.1),
        ("k", 7),
        ("acceptance", "exact"),
    ):
        assert matching({**balanced.values(), key: value}) == CUSTOM
    assert matching({**balanced.values(), "speculation": "off"}) == CUSTOM
