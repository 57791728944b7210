"""Tells the user, until they dismiss it, that a damaged history was moved aside and salvaged."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget

from app.engine.store.salvage import Recovery


def recovery_text(recovery: Recovery) -> str:
    plural = "" if recovery.conversations == 1 else "s"
    partly = "" if recovery.complete else " Some parts of it could not be read and are missing."
    return (
        "Your conversation history was damaged and could not be opened "
        f"({recovery.reason}). SpecChat started with a fresh history and recovered "
        f"{recovery.conversations} conversation{plural} ({recovery.messages} messages) from it."
        f"{partly}\n\nThe damaged file was kept, not deleted. It is now at:\n{recovery.moved_to}"
    )


def show_recovery(parent: QWidget, recovery: Recovery | None) -> QMessageBox | None:
    """Non-blocking: `open()` returns at once, so start-up goes on behind the message."""
    if recovery is None:
        return None
    box = QMessageBox(
        QMessageBox.Icon.Warning,
        "Conversation history was damaged",
        recovery_text(recovery),
        QMessageBox.StandardButton.Ok,
        parent,
    )
    box.open()
    return box
