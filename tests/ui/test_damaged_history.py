"""The window starts on a damaged conversations file and says so until the user dismisses it."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox

from tests.ui.test_main_window import make_window


def test_the_window_starts_on_a_file_of_zeros_and_tells_the_user(qtbot, specchat_home):
    specchat_home.mkdir(parents=True, exist_ok=True)
    (specchat_home / "c.sqlite3").write_bytes(b"\0" * 16384)
    w = make_window(qtbot, specchat_home)
    box = w.recovery_notice
    assert isinstance(box, QMessageBox), "a damaged file is told in a message box"
    assert box.isVisible(), "the message box is shown"
    recovery = w.store.recovery
    assert recovery is not None, "the damaged file is set aside"
    assert recovery.moved_to.exists(), "the damaged file is kept where the message says"
    assert "damaged" in box.text(), "the message says the file was damaged"
    assert str(recovery.moved_to) in box.text(), "the message says where the damaged file went"
    assert "recovered 0 conversations" in box.text()
    assert w.store.list() == [], "the fresh history is empty"
    assert w.store.create("fresh"), "a new conversation can be saved"
    box.accept()
    assert not box.isVisible()
    w.close()
