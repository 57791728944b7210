"""A real model's journey through the real start-up: SmolLM2-135M at 16 bits (fetched by the
README's test command), in the window that `python -m app` opens, with its own data folder.

First launch, the fetched model listed, loaded, a question answered as a stream, Stop mid-answer
(the button turns back to Send and the answer is kept as stopped), Regenerate, quit, and a relaunch
that brings back the conversation, the window's size and the pair.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QSize, Qt

from app.engine.gguf.fixtures import mlx_path
from app.engine.store.transcript import AnswerTurn, Change, MessageState
from app.ui.launch import open_main_window
from app.ui.main_window import MainWindow
from tests.ui.engine_gate import EngineGate

pytestmark = [pytest.mark.real_models, pytest.mark.slow]

SMOLLM2 = mlx_path("smollm2", 16)
SHORT, LONG = 16, 400  # answer lengths in tokens: SmolLM2 decodes a few tokens a second here


@pytest.fixture
def smollm2() -> Path:
    if not (SMOLLM2 / "config.json").is_file():
        pytest.skip(
            "SmolLM2 at 16 bits is not fetched (python -m app fetch-models --models smollm2 --bits 16)"
        )
    return SMOLLM2


def start(qtbot) -> tuple[MainWindow, list[object]]:
    window = open_main_window()
    qtbot.addWidget(window)
    scans: list[object] = []
    window.library.scanned.connect(scans.append)
    return window, scans


def ask(qtbot, window: MainWindow, text: str) -> list[Change]:
    changes: list[Change] = []
    window.controller.transcript.observers.append(lambda change, _turn: changes.append(change))
    window.composer.editor.setPlainText(text)
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return)
    return changes


def last_answer(window: MainWindow) -> AnswerTurn:
    answer = window.controller.transcript.last_answer()
    assert isinstance(answer, AnswerTurn)
    return answer


def test_first_launch_to_relaunch_with_a_real_model(qtbot, smollm2: Path, monkeypatch) -> None:
    gate = EngineGate(monkeypatch, after=2)
    w, scans = start(qtbot)
    qtbot.waitUntil(lambda: bool(scans), timeout=120_000)
    listed = [f for f in scans[0][0] if f.usable]  # type: ignore[index]
    assert any(Path(f.path).resolve() == smollm2.resolve() for f in listed), "fetched model not listed"

    w.load_pair(str(smollm2), None)
    qtbot.waitUntil(lambda: w.controller.pair is not None, timeout=120_000)
    assert "SmolLM2" in w.pair_label.text()
    w.controller.save_settings(replace(w.controller.chat_settings, max_tokens=SHORT))

    changes = ask(qtbot, w, "What is the capital of France?")
    shown_while_running = gate.text_shown_while_held(qtbot, w)
    qtbot.waitUntil(lambda: Change.FINISHED in changes, timeout=180_000)
    answer = last_answer(w)
    assert answer.state == MessageState.COMPLETE
    assert answer.text.strip(), "the model answered nothing"
    assert answer.text.strip()[:20] in w.view.toPlainText()
    assert answer.text.startswith(shown_while_running), "it streamed: the start was shown first"
    assert len(answer.text) > len(shown_while_running), "and the rest followed"
    assert "tok/s" in w.strip.text()

    w.controller.save_settings(replace(w.controller.chat_settings, max_tokens=LONG))
    changes = ask(qtbot, w, "Write a long story about a lighthouse keeper.")
    qtbot.waitUntil(gate.held.is_set, timeout=180_000)  # held mid-answer: Stop meets it there
    qtbot.waitUntil(lambda: w.composer.button.text() == "Stop", timeout=30_000)
    qtbot.mouseClick(w.composer.button, Qt.MouseButton.LeftButton)
    gate.release()
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=60_000)
    # Stop ends the model's work within the step under way (plain decoding here: one token)
    assert gate.tokens_after <= 1, f"{gate.tokens_after} tokens were decoded after Stop"
    assert w.composer.button.text() == "Send"
    stopped = last_answer(w)
    assert stopped.state == MessageState.CANCELLED, "the stopped answer is marked cancelled"
    assert stopped.text.strip(), "the words written before Stop are kept"
    assert len(w.controller.transcript.turns) == 4

    w.controller.save_settings(replace(w.controller.chat_settings, max_tokens=SHORT))
    w.regenerate(None)
    gate.text_shown_while_held(qtbot, w)
    qtbot.waitUntil(lambda: last_answer(w).state == MessageState.COMPLETE, timeout=180_000)
    regenerated = last_answer(w)
    assert regenerated.text.strip()
    assert len(w.controller.transcript.turns) == 4, "Regenerate replaces the stopped answer"
    turns = [t.text for t in w.controller.transcript.turns]
    cid = w.controller.conversation

    w.resize(760, 600)  # inside the offscreen screen, or the size is clamped
    qtbot.waitUntil(lambda: w.size() == QSize(760, 600))
    w.close()

    again, _ = start(qtbot)
    assert again.controller.conversation == cid
    assert [t.text for t in again.controller.transcript.turns] == turns
    assert regenerated.text.strip()[:20] in again.view.toPlainText()
    assert again.size() == QSize(760, 600)
    qtbot.waitUntil(lambda: again.controller.pair is not None, timeout=120_000)
    assert Path(again.controller.pair[0]).resolve() == smollm2.resolve()
    again.close()
