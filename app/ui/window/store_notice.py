"""Tells the user why their conversations are not open for saving, and offers Retry.

The window opens whatever state the conversations file is in (app.engine.store.opening); this is
where the user learns what is wrong and what to do. The message stays until dismissed, comes back
when a save is refused while the problem lasts (so Retry is never out of reach), and Retry opens
the file itself once the user has fixed it, without a restart.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QTimer, Signal, SignalInstance
from PySide6.QtWidgets import QAbstractButton, QMessageBox, QWidget

from app.engine.store.conversations import ConversationStore


class StoreNotice(QObject):
    reopened = Signal()  # Retry opened the file: what the window shows should be read again

    def __init__(
        self, parent: QWidget, store: ConversationStore, refusals: tuple[SignalInstance, ...] = ()
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.box: QMessageBox | None = None
        self.retry_button: QAbstractButton | None = None
        if store.problem is None:
            return
        self.box = QMessageBox(parent)
        self.box.setIcon(QMessageBox.Icon.Warning)
        self.box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        if store.problem.can_retry:
            self.retry_button = self.box.addButton("Retry", QMessageBox.ButtonRole.AcceptRole)
        self.box.addButton(QMessageBox.StandardButton.Close)
        self.box.buttonClicked.connect(self._clicked)
        for refused in refusals:
            refused.connect(self.remind)
        self._show()

    def _show(self) -> None:
        assert self.box is not None and self.store.problem is not None
        self.box.setWindowTitle(self.store.problem.title)
        self.box.setText(self.store.problem.text)
        self.box.open()  # non-blocking: start-up goes on behind it

    def remind(self) -> None:
        """A save was refused: show the message again while the problem lasts. Checked once the
        event loop is back, so the draft refused as the window closes keeps no dialog open."""
        QTimer.singleShot(0, self._remind_now)

    def _remind_now(self) -> None:
        window = self.parent()
        shown = isinstance(window, QWidget) and window.isVisible()
        if shown and self.box is not None and self.store.problem is not None and not self.box.isVisible():
            self._show()

    def retry(self) -> bool:
        """Open the file itself; on failure the message comes back with what is wrong now."""
        if self.store.retry():
            if self.box is not None:
                self.box.hide()
            self.reopened.emit()
            return True
        QTimer.singleShot(0, self._show)  # after the click has closed the box
        return False

    def _clicked(self, button: QAbstractButton) -> None:
        if button is self.retry_button:
            self.retry()
