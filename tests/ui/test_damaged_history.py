"""The window starts on a damaged conversations file and says so until the user dismisses it."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox

from tests.ui.test_main_window import make_window


def test_the_window_starts_on_a_file_of_zeros_and_tells_the_user(qtbot, specchat_home):
    specchat_home.mkdir(parents=True, exist_ok=True)
    (specchat_home / "c.sqlite3").write_bytes(b"\0" * 16384)
    w = make_window(qtbot, specchat_home)
    box = w.recovery_notice
    assert isinstance(box, QMessageBox) and box.isVisible()
    recovery = w.store.recovery
    assert recovery is not None and recovery.moved_to.exists()
    assert "damaged" in box.text() and str(recovery.moved_to) in box.text()
    assert "recovered 0 conversations" in box.text()
    assert w.store.list() == [] and w.store.create("fresh")
    box.accept()
    assert not box.isVisible()
    w.close()
