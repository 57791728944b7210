"""The transcript widget: exact per-token highlighting, markdown that keeps it, hover, and safety."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QGuiApplication, QTextCursor
from PySide6.QtWidgets import QMessageBox

from app.engine.decoding.events import Provenance, TokenEvent
from app.engine.store.provenance import Answer
from app.engine.store.transcript import AnswerStats, AnswerTurn, MessageState, Transcript
from app.ui.chat.chat_view import ChatView
from app.ui.chat.text.markdown import parse
from app.ui.chat.text.render import P_PROV, P_REJECTED, Options, block_tokens
from app.ui.chat.tokens import Assembler

D, M, L = Provenance.DRAFT, Provenance.MAIN, Provenance.LOOKUP


def answer_of(pieces: list[tuple[str, Provenance]], rnd: int = 0) -> Answer:
    a = Answer()
    for i, (text, prov) in enumerate(pieces):
        a.add(TokenEvent(i, text, prov, 0.0, rnd + i // 3, i))
    return a


def fragments(view: ChatView) -> list[tuple[str, object, object, bool]]:
    """(text, token index, provenance, has background) for every fragment of the document."""
    out = []
    block = view.document().begin()
    while block.isValid():
        for frag, token in block_tokens(block):
            fmt = frag.charFormat()
            out.append(
                (frag.text(), token, fmt.property(P_PROV), fmt.hasProperty(fmt.Property.BackgroundBrush))
            )
        block = block.next()
    return out


def make_view(qtbot) -> ChatView:
    view = ChatView(Transcript())
    qtbot.addWidget(view)
    view.resize(700, 500)
    return view


def test_streamed_tokens_are_highlighted_exactly_per_token(qtbot):
    view = make_view(qtbot)
    m = view.transcript.start_answer(1)
    for i, (text, prov) in enumerate([("Hel", M), ("lo", D), (" wor", D), ("ld", M), ("!", L)]):
        m.answer.add(TokenEvent(i, text, prov, 0.0, i // 3, i))
    view.transcript.extend_answer(m, 3)
    view.transcript.extend_answer(m, 5)
    frags = [f for f in fragments(view) if f[1] is not None]
    assert [(t, i, p, bg) for t, i, p, bg in frags] == [
        ("Hel", 0, "main", False),
        ("lo", 1, "draft", True),
        (" wor", 2, "draft", True),
        ("ld", 3, "main", False),
        ("!", 4, "lookup", True),
    ]
    view.set_options(Options(highlight=False))
    assert not any(bg for _, i, _, bg in fragments(view) if i is not None)


def test_markdown_render_keeps_token_boundaries_and_code_copy(qtbot):
    view = make_view(qtbot)
    pieces = [
        ("Some ", M),
        ("**bo", D),
        ("ld** ", D),
        ("text", M),
        ("\n\n```py", M),
        ("thon\nx = ", D),
        ("1\n", D),
        ("```\n", M),
        ("<img src=/dev/zero>", M),
    ]
    view.transcript.reset([AnswerTurn(1, answer_of(pieces))])
    frags = [f for f in fragments(view) if f[1] is not None]
    text = "".join(t for t, *_ in frags)
    assert "**" not in text, "bold marks are not shown"
    assert "```" not in text, "code fences are not shown"
    assert "bold" in text, "the bold word is shown"
    assert ("bo", 1, "draft", True) in frags, "the first half of the bold word keeps its draft token"
    assert ("ld", 2, "draft", True) in frags, "the second half keeps its own draft token"
    assert ("x = ", 5, "draft", True) in frags or any(t.startswith("x") and i == 5 for t, i, *_ in frags), (
        "the code keeps its first token from the draft"
    )
    assert "<img src=/dev/zero>" in view.toPlainText()
    assert view.resource_requests == []
    assert view.links.code == ["x = 1"]
    view.anchorClicked.emit(QUrl("specchat:copy/0"))
    assert QGuiApplication.clipboard().text() == "x = 1"


def test_hover_maps_position_to_token_and_stats(qtbot):
    view = make_view(qtbot)
    stats = AnswerStats(
        tokens=3, tokens_per_second=12.5, proposed=4, accepted=2, acceptance=0.5, mean_accepted=1.0
    )
    view.transcript.reset(
        [AnswerTurn(1, answer_of([("alpha ", M), ("beta ", D), ("gamma", L)]), stats=stats)]
    )
    at = view.toPlainText().index("beta")
    info = view.info_at(at + 1)
    assert info["token"] == 1, "hover finds the token under the pointer"
    assert info["provenance"] == "draft", "hover says the token came from the draft"
    assert info["round"] == 0, "hover gives the token's round"
    tip = view.tooltip_for(info)
    assert "draft (accepted)" in tip, "the tooltip says the draft token was accepted"
    assert "round 0" in tip, "the tooltip gives its round"
    assert "12.5 tok/s" in tip, "the tooltip gives the speed"
    assert "acceptance 50%" in tip, "the tooltip gives the acceptance"


def test_untrusted_output_loads_nothing_and_links_need_confirmation(qtbot, monkeypatch):
    view = make_view(qtbot)
    evil = (
        '![](file:///etc/passwd) ![x](/dev/zero) <img src="http://example.com/a.png"> '
        "[site](https://example.com) [f](file:///etc/hosts) <b>bold?</b> <script>alert(1)</script>"
    )
    view.transcript.reset([AnswerTurn(1, answer_of([(evil, M)]))])
    view.show()
    qtbot.waitExposed(view)
    assert view.resource_requests == []
    doc_text = view.toPlainText()
    assert '<img src="http://example.com/a.png">' in doc_text, "an image tag is shown as text, not loaded"
    assert "<b>bold?</b>" in doc_text, "HTML tags are shown as text"
    assert "<script>" in doc_text
    block = view.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            assert not it.fragment().charFormat().isImageFormat()
            it += 1
        block = block.next()
    assert view.links.urls == ["file:///etc/passwd", "/dev/zero", "https://example.com", "file:///etc/hosts"]
    opened, asked = [], []
    monkeypatch.setattr(
        "app.ui.chat.chat_view.QDesktopServices.openUrl", lambda url: opened.append(url.toString())
    )
    monkeypatch.setattr(QMessageBox, "information", lambda *a: asked.append(a[2]))
    view.confirm_link = lambda url: (asked.append(url), False)[1]
    view.anchorClicked.emit(QUrl("specchat:link/2"))
    assert opened == [], "a refused link is not opened"
    assert asked == ["https://example.com"], "the user is asked before a link opens"
    view.confirm_link = lambda url: True
    view.anchorClicked.emit(QUrl("specchat:link/2"))
    view.anchorClicked.emit(QUrl("specchat:link/0"))  # file: is never opened, even when confirmed
    view.anchorClicked.emit(QUrl("https://example.com"))  # only our own anchors do anything
    assert opened == ["https://example.com"]


def test_refused_drafts_are_marked_and_told_on_hover_never_inline(qtbot):
    view = make_view(qtbot)
    view.options = Options(show_rejected=True)
    m = view.transcript.start_answer(1)
    a = m.answer
    asm = Assembler(a)
    asm.token(TokenEvent(1, "The", D, 0.0, 0, 0))
    asm.token(TokenEvent(2, " cat", M, 0.0, 0, 1))
    assert "The" not in view.toPlainText()  # its round is not over: which drafts were refused is unknown
    asm.round(1, "<[7, 8]>")  # the round's refused drafts, as the engine decoded them
    assert a.rejected == [(1, "<[7, 8]>")]
    view.transcript.extend_answer(m, asm.ready)
    # the line reads as written
    assert "The cat" in view.toPlainText(), "the answer reads as written"
    assert "<[7" not in view.toPlainText(), "refused drafts are not shown inside the answer"
    view.transcript.finish_answer(m, MessageState.COMPLETE, AnswerStats(tokens=2))
    assert "The cat" in view.toPlainText(), "the finished answer reads as written"
    assert "<[7" not in view.toPlainText(), "refused drafts stay out of the finished answer"
    cursor = QTextCursor(view.document())
    cursor.setPosition(view.toPlainText().index(" cat") + 1)
    assert cursor.charFormat().property(P_REJECTED)  # the token written instead is underlined
    tip = view.tooltip_for(view.info_at(view.toPlainText().index("The")))
    assert tip.startswith("Token 0"), "the tooltip names the token"
    assert "The draft proposed “<[7, 8]>”" in tip, "the tooltip gives what the draft proposed in that round"
    view.set_options(Options(show_rejected=False))
    tip = view.tooltip_for(view.info_at(view.toPlainText().index("The")))
    assert "<[7" not in tip


def test_surrogates_and_codec_round_trip():
    a = answer_of([("ok \ud800", M), ("é", D)])
    assert a.text == "ok \ufffdé"
    b = Answer.decode(a.text, a.encoded())
    assert b.provenance == a.provenance, "provenance survives the round trip"
    assert b.parts == a.parts, "the token pieces survive the round trip"
    assert Answer.decode("abc", "99m0").parts == ["abc"]  # inconsistent codes fall back safely


def test_markdown_parser_ranges_are_source_slices():
    text = "# Title\n\n- one *two*\n- `three`\n\n> quote\n\npara [link](http://x) end\n```\ncode\n```"
    blocks = parse(text)
    assert [b.kind for b in blocks] == ["h", "li", "li", "quote", "p", "code"]
    seen = "".join(text[s.start : s.end] for b in blocks for s in b.spans)
    assert seen == "Titleone twothreequotepara link endcode"


@pytest.mark.timeout(20)
def test_many_checked_answers_are_marked_in_one_pass(qtbot):
    """Each answer's divergence used to be found by its own pass over the whole document: 400
    checked answers of 150 tokens took about a minute to draw; one pass takes about a second."""
    from app.engine.store.transcript import LosslessVerdict, UserTurn, Verdict

    view = make_view(qtbot)
    turns: list[UserTurn | AnswerTurn] = []
    for n in range(400):
        verdict = LosslessVerdict(Verdict.WIDE_MARGIN, "diverged", position=n % 150)
        answer = answer_of([(f"w{i} ", M) for i in range(150)])
        turns += [UserTurn(2 * n, "q"), AnswerTurn(2 * n + 1, answer, stats=AnswerStats(lossless=verdict))]
    view.transcript.reset(turns)
    marks = view.extraSelections()
    assert len(marks) == 400
    assert [m.cursor.selectedText() for m in marks[:3]] == ["w0 ", "w1 ", "w2 "]


def test_a_long_answer_shares_its_formats_and_every_character_keeps_its_token(qtbot):
    """A format per token made the document hold ~0.6 KB per token; tokens now share formats,
    and hover still names each character's own token and round."""
    view = make_view(qtbot)
    m = view.transcript.start_answer(1)
    words = [(f" w{i}", D if i % 3 else M) for i in range(2000)]
    code = [(f"x = {i}\n", L if i % 2 else M) for i in range(400)]
    pieces = [("Intro:", M), *words, ("\n\n```python\n", M), *code, ("```\n\nEnd.", M)]
    for i, (text, prov) in enumerate(pieces):
        m.answer.add(TokenEvent(i, text, prov, 0.0, i // 3, i))
    for ready in range(50, len(pieces), 50):
        view.transcript.extend_answer(m, ready)
    view.transcript.finish_answer(m, MessageState.COMPLETE, AnswerStats())
    assert len(view.document().allFormats()) < len(pieces) / 4
    shown = [
        (text.replace("\u2028", "\n"), token) for text, token, *_ in fragments(view) if token is not None
    ]
    strays = [(text, token) for text, token in shown if text not in m.answer.parts[token]]
    assert strays == [], "every piece of text shown is part of the token hover names for it"
    order = [token for _, token in shown]
    assert order == sorted(order), "tokens are shown in order"
    assert set(order) == set(range(len(pieces))) - {len(words) + 1}, "every token is shown but the fence's"
    at = view.toPlainText().index(" w1234") + 2
    assert view.info_at(at) == {"message": 1, "token": 1235, "provenance": "draft", "round": 1235 // 3}
    at = view.toPlainText().index("x = 321") + 5
    assert view.info_at(at)["token"] == len(words) + 2 + 321
