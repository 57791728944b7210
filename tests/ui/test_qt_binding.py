"""The Qt binding must not leak references to None (PySide6 6.12.0 did, fatally on 3.11)."""

import sys

import pytest
from PySide6.QtWidgets import QWidget


@pytest.mark.skipif(
    sys.version_info >= (3, 12),
    reason="None is immortal from Python 3.12: its reference count never changes, so a leak cannot show",
)
def test_void_qt_calls_keep_none_alive(qtbot):
    widget = QWidget()
    qtbot.addWidget(widget)
    before = sys.getrefcount(None)
    for _ in range(2000):
        widget.setObjectName("probe")
        widget.setProperty("probe", 1)
    assert abs(sys.getrefcount(None) - before) < 50
