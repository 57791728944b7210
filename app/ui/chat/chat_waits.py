"""The chat's long waits on the wait panel: loading a pair (and the work it stops first), its
warm-up, reading the prompt.

It only reads the controller's state and the worker's messages, after the controller has handled
them, and looks again on a timer, so a load or a question shows up without the controller having
to report it. Cancel goes through the controller's and the bridge's own commands: Stop for an
answer, a cancel of the load request for the warm-up (the pair stays loaded, its first answer's
prices are just less sure) and for the load itself (the window forgets the load it asked for).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer

from app.engine.decoding.events import PrefillProgress, WarmUpProgress
from app.engine.protocol import LoadQueued, LoadStarted, WorkerMessage
from app.ui.chat.chat_controller import ChatController
from app.ui.common.wait_progress import TICK_MS, WaitPanel


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


class ChatWaits(QObject):
    def __init__(self, controller: ChatController, panel: WaitPanel, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.controller, self.panel = controller, panel
        self.key: tuple[str, int] | None = None
        # request -> its last PrefillProgress or WarmUpProgress; a load's LoadQueued or LoadStarted
        self.counts: dict[int, object] = {}
        controller.bridge.batch.connect(self.on_batch)  # connected after the controller's own slot
        controller.busy_changed.connect(lambda _busy: self.sync())
        self.timer = QTimer(self, interval=TICK_MS)
        self.timer.timeout.connect(self.sync)
        self.timer.start()

    def on_batch(self, batch: tuple[WorkerMessage, ...]) -> None:
        c = self.controller
        current = {c.load_request, c.live.request if c.live is not None else None}
        for message in batch:  # a stopped request's late reports are not kept
            kept = (PrefillProgress, WarmUpProgress, LoadQueued, LoadStarted)
            if isinstance(message.event, kept) and message.request in current:
                self.counts[message.request] = message.event
        self.sync()

    def sync(self) -> None:
        """Show the wait the controller is in now, if any, and end the one it left."""
        c = self.controller
        key: tuple[str, int] | None = None
        if c.load_request is not None:
            said = self.counts.get(c.load_request)
            kind = "warm-up" if isinstance(said, WarmUpProgress) else "load"
            if isinstance(said, LoadQueued):  # the work before it has not stopped yet
                kind = "stopping" if said.stopping else "after-load"
            key = (kind, c.load_request)
        elif c.live is not None and c.live.stats.tokens == 0:
            key = ("prompt", c.live.request)
        if key != self.key:
            if self.key is not None:
                self.panel.end(self.key)  # a row its button cancelled has already gone
                if key is None or key[1] != self.key[1]:
                    self.counts.pop(self.key[1], None)
            self.key = key
            if key is not None:
                self._begin(key)
        if key is not None:
            event = self.counts.get(key[1])
            if isinstance(event, (PrefillProgress, WarmUpProgress)):
                self.panel.progress(key, event.done, event.total)

    def _begin(self, key: tuple[str, int]) -> None:
        c, kind, request = self.controller, key[0], key[1]
        main, draft = c.loading
        names = f"{_name(main)} and {_name(draft)}" if draft else _name(main)
        if kind == "load":
            self.panel.begin(key, f"Loading {names}", memory=f"load:{main}:{draft}", cancel=self._cancel_load)
        elif kind in ("stopping", "after-load"):  # not timed as a load: the load has not begun
            what = (
                "Stopping the current work"
                if kind == "stopping"
                else "Waiting for the models already loading"
            )
            self.panel.begin(key, f"{what}, then loading {names}", memory="", cancel=self._cancel_load)
        elif kind == "warm-up":
            self.panel.begin(
                key,
                "Preparing the draft: compiling its pass shapes",
                memory=f"warm-up:{main}:{draft}",
                cancel=lambda: c.bridge.cancel(request),
                cancel_text="Skip",
                unit="shapes",
            )
        else:
            live = c.live
            self.panel.begin(
                key,
                "Reading the prompt",
                memory=f"prompt:{live.main if live else main}",
                cancel=c.stop,
                cancel_text="Stop",
                unit="tokens",
            )

    def _cancel_load(self) -> None:
        self.controller.cancel_load()
