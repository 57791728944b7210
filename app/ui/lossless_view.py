"""The losslessness check of one answer, from the chat: refuse what cannot be compared, run the
replay on the engine worker, show the verdict under the answer and keep it with the message.

An answer's token ids, its sampling temperature and the models that wrote it are kept in the
message's stats by the chat controller; the replay needs all three to mean anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from app.engine.protocol import CheckLossless, EngineError, LosslessReport, WorkerMessage

if TYPE_CHECKING:
    from app.ui.chat_controller import ChatController
    from app.ui.chat_view import ViewMessage

IDENTICAL, NEAR_TIE, DIVERGENCE = "#2e8540", "#c77700", "#c0392b"
MARKS = {"identical": ("✓", IDENTICAL), "near-tie": ("≈", NEAR_TIE), "wide-margin": ("✗", DIVERGENCE)}


def verdict_line(stats: dict[str, Any], checking: bool) -> tuple[str, str] | None:
    """The line shown under an answer, and its colour ("" for the muted colour)."""
    if checking:
        return "Checking losslessness: replaying this answer greedily without the draft…", ""
    check = stats.get("lossless")
    if not isinstance(check, dict) or not check.get("message"):
        return None
    mark, colour = MARKS.get(str(check.get("verdict")), ("", ""))
    if not mark:
        return f"Losslessness not checked: {check['message']}", ""
    return f"{mark} Losslessness: {check['message']}", colour


def _name(path: object) -> str:
    return Path(str(path)).name or str(path)


class LosslessChecker(QObject):
    """One check at a time; `busy` while the worker replays. Late results of a cancelled or
    forgotten check are ignored."""

    busy_changed = Signal(bool)

    def __init__(self, controller: ChatController, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.running: tuple[int, int] | None = None  # (request, message key)
        controller.bridge.batch.connect(self.on_batch)

    @property
    def busy(self) -> bool:
        return self.running is not None

    def _message(self, key: int) -> ViewMessage | None:
        return next((m for m in self.controller.view.messages if m.key == key), None)

    def refusal(self, m: ViewMessage) -> str | None:
        """Why a greedy replay of `m` would be meaningless or impossible; None when it can run."""
        stats, pair = m.stats, self.controller.pair
        if not stats.get("token_ids"):
            return "this answer has no recorded token ids (it was written before SpecChat kept them)."
        temperature = stats.get("temperature")
        if isinstance(temperature, (int, float)) and temperature > 0:
            return (
                f"it was sampled at temperature {temperature:g}, so plain greedy decoding is not expected to "
                "reproduce it. Only answers written at temperature 0 can be checked."
            )
        if pair is None:
            return "no model is loaded. Load the pair that wrote this answer (Models ▸ Choose models…)."
        if stats.get("main") and stats["main"] != pair[0]:
            return (
                f"it was written by {_name(stats['main'])}, but {_name(pair[0])} is loaded. Load it to check."
            )
        return None

    def check_last(self) -> bool:
        last = next((m for m in reversed(self.controller.view.messages) if m.role == "assistant"), None)
        if last is None:
            self.controller.notice.emit("There is no answer to check yet.")
            return False
        return self.check(last.key)

    def check(self, key: int) -> bool:
        m = self._message(key)
        c = self.controller
        if m is None or m.role != "assistant":
            c.notice.emit("Only an assistant's answer can be checked.")
            return False
        if m.live or c.busy or c.load_request is not None:
            c.notice.emit("Wait until the answer is finished and the models are loaded, then check it.")
            return False
        if self.running is not None:
            c.notice.emit("A losslessness check is already running.")
            return False
        reason = self.refusal(m)
        if reason is not None:  # shown, not stored: loading the right model may lift it
            m.stats["lossless"] = {"verdict": "not-checked", "message": reason}
            c.view.refresh()
            c.notice.emit(f"Losslessness not checked: {reason}")
            return False
        index = next(i for i, x in enumerate(c.view.messages) if x is m)
        system = c.chat_settings.system_prompt
        history = ([{"role": "system", "content": system}] if system else []) + [
            {"role": x.role, "content": x.answer.text} for x in c.view.messages[:index]
        ]
        prompt_tokens = m.stats.get("prompt_tokens")
        command = CheckLossless(
            tuple(history),
            tuple(int(t) for t in m.stats["token_ids"]),
            prompt_tokens if isinstance(prompt_tokens, int) else None,
        )
        self.running = (c.bridge.submit(command), key)
        m.checking = True
        m.stats.pop("lossless", None)
        c.view.refresh()
        c.strip.set_state("Checking losslessness…")
        self.busy_changed.emit(True)
        return True

    def cancel(self) -> None:
        if self.running is None:
            return
        self.controller.bridge.cancel(self.running[0])
        self._done(self.running[1], None, "Losslessness check cancelled.")

    def on_batch(self, batch: tuple[WorkerMessage, ...]) -> None:
        for message in batch:
            if self.running is None or message.request != self.running[0]:
                continue
            event, key = message.event, self.running[1]
            if isinstance(event, LosslessReport):
                if event.verdict == "cancelled":
                    self._done(key, None, "Losslessness check cancelled.")
                else:
                    self._done(key, self._record(event), event.message)
            elif isinstance(event, EngineError):
                self._done(key, {"verdict": "error", "message": event.message}, event.message)

    def _record(self, report: LosslessReport) -> dict[str, Any]:
        return {
            "verdict": report.verdict,
            "message": report.message,  # names the two tokens where they diverge
            "position": report.position,
            "compared": report.compared,
            "top2_margin": report.top2_margin,
            "answer_gap": report.answer_gap,
        }

    def _done(self, key: int, record: dict[str, Any] | None, text: str) -> None:
        """Show the outcome; a real verdict is saved with the message, a refusal or error is not."""
        self.running = None
        c = self.controller
        m = self._message(key)
        if m is not None:
            m.checking = False
            if record is not None:
                m.stats["lossless"] = record
                if record["verdict"] in MARKS:
                    c.store.checkpoint(
                        m.key,
                        m.answer.text,
                        state=m.state,
                        tokens=m.answer.encoded(),
                        rejected=m.answer.rejected,
                        stats=m.stats,
                    )
            c.view.refresh()
        c.strip.set_state("Ready" if c.pair is not None else "No model loaded")
        c.notice.emit(text)
        self.busy_changed.emit(False)
