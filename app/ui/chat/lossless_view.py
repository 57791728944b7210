"""The losslessness check of one answer, from the chat: refuse what cannot be compared, run the
replay on the engine worker, and record the verdict in the transcript, which shows it under the
answer; a measured verdict is saved with the message.

An answer's token ids, its sampling temperature and the models that wrote it are kept in its
stats by the chat controller; the replay needs all three to mean anything.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.engine.protocol import CheckLossless, EngineError, LosslessReport, WorkerMessage
from app.engine.store.transcript import AnswerTurn, LosslessVerdict, Verdict
from app.ui.chat.chat_controller import ChatController


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

    def refusal(self, m: AnswerTurn) -> str | None:
        """Why a greedy replay of `m` would be meaningless or impossible; None when it can run."""
        stats, pair = m.stats, self.controller.pair
        if not stats.token_ids:
            return "this answer has no recorded token ids (it was written before SpecChat kept them)."
        if stats.temperature is not None and stats.temperature > 0:
            return (
                f"it was sampled at temperature {stats.temperature:g}, so plain greedy decoding is not "
                "expected to reproduce it. Only answers written at temperature 0 can be checked."
            )
        if pair is None:
            return "no model is loaded. Load the pair that wrote this answer (Models ▸ Choose models…)."
        if stats.main and stats.main != pair[0]:
            return f"it was written by {_name(stats.main)}, but {_name(pair[0])} is loaded. Load it to check."
        return None

    def check_last(self) -> bool:
        last = self.controller.transcript.last_answer()
        if last is None:
            self.controller.notice.emit("There is no answer to check yet.")
            return False
        return self.check(last.key)

    def check(self, key: int) -> bool:
        c = self.controller
        transcript = c.transcript
        m = transcript.answer(key)
        if m is None:
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
            transcript.record_verdict(m, LosslessVerdict(Verdict.NOT_CHECKED, reason))
            c.notice.emit(f"Losslessness not checked: {reason}")
            return False
        command = CheckLossless(
            transcript.chat(c.chat_settings.system_prompt, before=transcript.position(key)),
            m.stats.token_ids,
            m.stats.prompt_tokens,
        )
        self.running = (c.bridge.submit(command), key)
        transcript.start_check(m)
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
                self._done(key, LosslessVerdict(Verdict.ERROR, event.message), event.message)

    def _record(self, report: LosslessReport) -> LosslessVerdict:
        """The report as the transcript keeps it; its message already names the two tokens
        where the answers diverge (the engine decodes them)."""
        try:
            verdict = Verdict(str(report.verdict))
        except ValueError:
            verdict = Verdict.ERROR
        return LosslessVerdict(
            verdict, report.message, report.position, report.compared, report.top2_margin, report.answer_gap
        )

    def _done(self, key: int, record: LosslessVerdict | None, text: str) -> None:
        """Show the outcome; a measured verdict is saved with the message, a refusal or error is not."""
        self.running = None
        c = self.controller
        m = c.transcript.answer(key)
        if m is not None:
            c.transcript.record_verdict(m, record)
            if record is not None and record.measured:
                c.store.save_answer(m)
        c.strip.set_state("Ready" if c.pair is not None else "No model loaded")
        c.notice.emit(text)
        self.busy_changed.emit(False)
