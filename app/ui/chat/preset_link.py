"""Keeps the composer's preset combo and the open conversation's settings in step."""

from __future__ import annotations

from PySide6.QtCore import QObject, QSettings

from app.ui.chat.chat_controller import ChatController
from app.ui.chat.composer import Composer


class PresetLink(QObject):
    def __init__(self, composer: Composer, controller: ChatController, settings: QSettings) -> None:
        super().__init__(composer)
        self.composer, self.controller, self.settings = composer, controller, settings
        composer.preset_chosen.connect(self.choose)
        controller.switched.connect(self.show)
        controller.busy_changed.connect(lambda _busy: self.show())  # settings a script set directly
        self.show()

    def choose(self, name: str) -> None:
        """Stored with the conversation, and the default for the next one, as Settings does."""
        chosen = self.controller.chat_settings.with_preset(name)
        self.controller.save_settings(chosen)
        self.settings.setValue("defaults", chosen.to_dict())
        self.show()

    def show(self) -> None:
        self.composer.show_preset(self.controller.chat_settings.preset)
