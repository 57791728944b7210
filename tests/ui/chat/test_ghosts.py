"""Refused drafts in the window: off by default; when turned on, the answer still reads as written
and hovering a token of a round in which the main model refused the draft shows what was refused."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint
from PySide6.QtGui import QHelpEvent, QTextCursor
from PySide6.QtWidgets import QApplication, QToolTip

from app.ui.chat.text.ghosts import SHOWN, ghost_lines
from tests.ui.test_main_window import engine, type_and_send

WORDS = ["Otters", " hold", " hands", " while", " they", " sleep", " so", " they", " stay", " together."]


def hover(monkeypatch, view, position: int) -> str:
    """The tooltip the view asks Qt to show with the pointer over the character at `position`
    (the offscreen platform shows no tooltip window, so the request is what is checked)."""
    shown: list[str] = []
    monkeypatch.setattr(QToolTip, "showText", lambda _at, text, *_rest: shown.append(text))
    cursor = QTextCursor(view.document())
    cursor.setPosition(position)
    point = view.cursorRect(cursor).center() + QPoint(2, 0)
    help_event = QHelpEvent(QEvent.Type.ToolTip, point, view.viewport().mapToGlobal(point))
    QApplication.sendEvent(view.viewport(), help_event)
    return shown[-1] if shown else ""


def test_ghosts_are_off_by_default_then_shown_on_hover_not_inline(qtbot, window, monkeypatch):
    assert not window.view.options.show_rejected, "refused drafts are hidden by default"
    assert not window.toggles.rejected.isChecked(), "the View menu's switch is off by default"
    window.toggles.rejected.trigger()  # View ▸ Show refused drafts
    assert window.view.options.show_rejected
    engine(window).script = WORDS
    window.controller.chat_settings = window.controller.chat_settings.__class__(max_tokens=len(WORDS))
    type_and_send(qtbot, window, "Tell me about otters")
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)
    turn = window.controller.transcript.last_answer()
    answer = turn.answer
    # the draft was refused in some rounds
    assert answer.text == "".join(WORDS), "the answer reads as the engine wrote it"
    assert answer.rejected, "some drafts were refused"
    assert answer.text in window.view.toPlainText()  # no refused text inside the sentence

    at, refused = answer.rejected[0]
    token = min(at, len(answer.parts) - 1)
    same_round = [i for i, r in enumerate(answer.rounds) if r == answer.rounds[token]]
    start, _end = window.view.token_range(turn.key, same_round[0])
    tip = hover(monkeypatch, window.view, start)
    assert f"The draft proposed “{refused}”" in tip, "the tooltip gives what the draft proposed"
    assert "the main model refused it" in tip, "the tooltip says the main refused it"

    plain_round = next(
        (i for i, r in enumerate(answer.rounds) if not ghost_lines(answer, r)), None
    )  # a round where every draft was accepted says nothing about refusals
    if plain_round is not None:
        start, _end = window.view.token_range(turn.key, plain_round)
        assert "refused" not in hover(monkeypatch, window.view, start)

    window.toggles.rejected.trigger()  # off again: the hover no longer mentions them
    start, _end = window.view.token_range(turn.key, same_round[0])
    assert "refused" not in hover(monkeypatch, window.view, start)


def test_a_long_refused_draft_is_shortened_in_the_tooltip():
    from app.engine.decoding.events import Provenance, TokenEvent
    from app.engine.store.provenance import Answer

    a = Answer()
    a.add(TokenEvent(1, "Hi", Provenance.MAIN, 0.0, 0, 0))
    a.rejected.append((1, "x\n" * SHOWN))  # after the last token: it belongs to that token's round
    [line] = ghost_lines(a, 0)
    assert "⏎" in line, "line breaks are shown as ⏎"
    assert "…" in line, "a long draft is cut with …"
    assert len(line) < SHOWN + 100, "the tooltip line stays short"
