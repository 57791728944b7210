"""The window says in plain words whether the loaded pair runs on the GPU or the CPU."""

from __future__ import annotations

import pytest

from app.devtools.fake_engine import ExactClock, FakeEngine
from app.engine.protocol import Device
from tests.ui.test_main_window import make_window


@pytest.mark.parametrize(
    ("device", "words"), [(Device.GPU, "running on the GPU"), (Device.CPU, "running on the CPU")]
)
def test_pair_line_names_the_device(qtbot, tmp_path, device, words):
    w = make_window(
        qtbot, tmp_path, engine_factory=lambda emit: FakeEngine(emit, clock=ExactClock(), device=device)
    )
    w.load_pair("/models/main", "/models/draft", "fixed")
    qtbot.waitUntil(lambda: w.controller.pair == ("/models/main", "/models/draft"), timeout=10_000)
    assert w.pair_label.text() == f"main  +  draft  ·  {words}"


def test_pair_line_says_nothing_of_a_device_not_reported(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path)
    w.load_pair("/models/main", None, "plain")
    qtbot.waitUntil(lambda: w.controller.pair == ("/models/main", None), timeout=10_000)
    assert "running on" not in w.pair_label.text()
