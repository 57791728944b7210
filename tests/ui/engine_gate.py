"""The real engine, held mid-answer on demand: what a test needs to see an answer stream.

How many batches a view timer makes of an answer depends on the machine's load: on a busy one a
whole short answer can reach the view in one. A test that means "it streamed" holds the engine
after a token instead, checks what the user sees while the answer is still running, and lets it
go on; no clock or batch count is involved.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from app.engine import worker
from app.engine.decoding.events import RoundEvent, TokenEvent

HOLD_LIMIT_S = 600  # a test that forgets to release never hangs the suite for good


class EngineGate:
    """Holds each answer of the window's worker after the round of its `after`-th token until
    `release()`.

    `tokens_held`: how many tokens the answer had when it was held; `tokens_after`: how many it
    emitted after the release (a Stop sent while held bounds these to the round under way)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, after: int = 1) -> None:
        self.after = after
        self.held = threading.Event()
        self._go = threading.Event()
        self.tokens_held = 0
        self.tokens_after = 0
        real = worker.generate

        def gated(*args: Any, **kwargs: Any) -> Iterator[object]:
            count, holding = 0, True
            for event in real(*args, **kwargs):
                yield event
                if isinstance(event, TokenEvent):
                    count += 1
                    self.tokens_after += 0 if holding else 1
                # held at the end of a round: the chat shows a round's tokens once it is whole
                elif isinstance(event, RoundEvent) and holding and count >= self.after:
                    holding = False
                    self.tokens_held, self.tokens_after = count, 0
                    go = self._go  # taken before `held` is seen, so a release cannot be missed
                    self.held.set()
                    go.wait(HOLD_LIMIT_S)

        monkeypatch.setattr(worker, "generate", gated)

    def text_shown_while_held(self, qtbot: Any, window: Any) -> str:
        """Once the answer is held: the text of it the chat shows while it is still running (not
        empty); then the engine goes on."""
        from app.engine.store.transcript import AnswerTurn

        qtbot.waitUntil(self.held.is_set, timeout=120_000)

        def shown() -> str:
            answer = window.controller.transcript.last_answer()
            text = answer.text if isinstance(answer, AnswerTurn) else ""
            return text if text and text.strip()[:20] in window.view.toPlainText() else ""

        qtbot.waitUntil(lambda: bool(shown()), timeout=30_000)
        assert window.controller.busy, "the answer is still running while its start is shown"
        start = shown()
        self.release()
        return start

    def release(self) -> None:
        """Let the held answer go on; the next answer is held again."""
        self.held.clear()
        self._go.set()
        self._go = threading.Event()
