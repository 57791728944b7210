"""What the user does in the chat, answered for the main window: send, stop, regenerate, edit,
copy and check an answer. The worker runs one command at a time, so an arena run or a
losslessness check holding it turns a request away with the reason instead of queueing it."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMainWindow

from app.ui.arena.arena import ArenaDialog
from app.ui.chat.chat_controller import ChatController
from app.ui.chat.composer import Composer
from app.ui.chat.composer_drafts import DraftKeeper
from app.ui.chat.empty_states import NeedModelsBar
from app.ui.chat.lossless_view import LosslessChecker


class ChatActions(QMainWindow):
    """The main window's base: MainWindow builds these parts before any action can run."""

    controller: ChatController
    checker: LosslessChecker
    composer: Composer
    need_models: NeedModelsBar
    drafts: DraftKeeper
    arena: ArenaDialog | None

    def engine_taken(self) -> str | None:
        """Why the worker cannot start an answer now (it runs one command at a time)."""
        if self.checker.busy:
            return "A losslessness check is running: wait for it or stop it (Chat ▸ Stop)."
        if self.arena is not None and self.arena.running:
            return "The draft arena is running: wait for it or cancel it in the arena window."
        return None

    def _send(self, text: str) -> None:
        taken = self.engine_taken()
        if taken is not None:
            self.statusBar().showMessage(taken, 8000)
            return
        if self.controller.pair is None and self.controller.load_request is not None:
            self.statusBar().showMessage("The models are still loading: send once they are ready.", 8000)
            return
        if self.controller.send(text):  # committed: only now may the text leave the box
            self.drafts.sent()
            self.composer.set_note("")
        elif self.controller.pair is None and self.controller.load_request is None:
            self.need_models.show()  # the text stays in the box for when the models are loaded
            self.statusBar().clearMessage()  # the bar says it, with its button

    def regenerate(self, key: int | None) -> None:
        taken = self.engine_taken()
        if taken is not None:
            self.statusBar().showMessage(taken, 8000)
        else:
            self.controller.regenerate(key)

    def _stop(self) -> None:
        if self.controller.live is None and self.controller.cancel_load():  # Esc while a pair loads
            return
        if self.controller.editing is not None and not self.controller.busy:
            self.controller.cancel_edit()
        self.controller.stop()
        self.checker.cancel()

    def _on_message_action(self, kind: str, key: int) -> None:
        if kind == "regenerate":
            self.regenerate(key)
        elif kind == "check":
            self.check_answer(key)
        elif kind == "cancelcheck":
            self.checker.cancel()
        elif kind == "edit":
            text = self.controller.begin_edit(key)
            if text is not None:
                self.composer.editor.setPlainText(text)
                self.composer.set_note(
                    "Editing an earlier message: sending replaces it and everything after it (Esc cancels)"
                )
                self.composer.editor.setFocus()
        elif kind == "copymsg":
            m = self.controller.transcript.find(key)
            if m is not None:
                QGuiApplication.clipboard().setText(m.text)

    def _arena_blocked(self) -> str | None:
        if self.controller.busy or self.controller.load_request is not None:
            return (
                "Wait for the current answer or model load to finish (or stop it) before running the arena."
            )
        return "A losslessness check is running: wait for it first." if self.checker.busy else None

    def check_answer(self, key: int | None = None) -> bool:
        """Check one answer (None: the last one) unless the arena holds the worker."""
        if self.arena is not None and self.arena.running:
            self.statusBar().showMessage("The draft arena is running: wait for it or cancel it first.", 8000)
            return False
        return self.checker.check_last() if key is None else self.checker.check(key)
