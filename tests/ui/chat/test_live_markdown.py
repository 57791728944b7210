"""Markdown while an answer streams: bold, lists and code read as they will once it finishes, each
token keeps its colour, a cut-off answer keeps its code, and a long code block costs little per batch.
"""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PySide6.QtGui import QFont, QTextCharFormat

import app.ui.chat.text.live_markdown as live_markdown
from app.engine.decoding.events import Provenance, TokenEvent
from app.engine.store.transcript import AnswerStats, AnswerTurn, MessageState, Transcript
from app.ui.chat.chat_view import ChatView
from app.ui.chat.text.render import P_TOKEN, P_TOKEN_LOW, block_tokens
from tests.ui.chat.test_chat_view import fragments
from tests.ui.chat.test_markdown import documents

D, M, L = Provenance.DRAFT, Provenance.MAIN, Provenance.LOOKUP


def stream(view: ChatView, pieces: list[tuple[str, Provenance]], batches: list[int]) -> AnswerTurn:
    """Start an answer and show it in batches: `batches` are token counts where a batch ends."""
    m = view.transcript.start_answer(1)
    for i, (text, prov) in enumerate(pieces):
        m.answer.add(TokenEvent(i, text, prov, 0.0, i // 3, i))
    for ready in [*batches, len(pieces)]:
        view.transcript.extend_answer(m, ready)
    return m


def rendered(view: ChatView) -> str:
    """The document as HTML, with our link and copy anchors replaced by what they point to."""
    links = view.links

    def target(match: re.Match[str]) -> str:
        n = int(match.group(2))
        return html.escape(links.urls[n] if match.group(1) == "link" else links.code[n])

    return re.sub(r"specchat:(link|copy)/(\d+)", target, view.document().toHtml())


def test_markdown_is_drawn_while_the_answer_streams(qtbot):
    view = ChatView(Transcript())
    qtbot.addWidget(view)
    pieces = [
        ("Some ", M),
        ("**bo", D),
        ("ld** ", D),
        ("words", L),
        ("\n\n- one\n", M),
        ("- two\n\n```py", M),
        ("thon\ndef f():\n", D),
        ("    return **1**\n", M),
        ("    # still open", D),
    ]
    stream(view, pieces, [2, 4, 6, 8])  # not finished: the fence is still open
    shown = view.toPlainText()
    assert "**bo" not in shown and "ld**" not in shown, "bold marks are hidden while streaming"
    assert "- one" not in shown, "list dashes become bullets while streaming"
    assert "```" not in shown, "code fences are hidden while streaming"
    assert "• one" in shown, "the first item shows with a bullet"
    assert "• two" in shown, "the second item shows with a bullet"
    assert "def f():\n    return **1**\n    # still open" in shown  # code shows as typed
    frags = [f for f in fragments(view) if f[1] is not None]
    assert ("bo", 1, "draft", True) in frags, "the bold word keeps its draft token"
    assert ("words", 3, "lookup", True) in frags, "looked-up words keep their lookup token"
    bold = next(f for f in view_fragments(view) if f[0] == "bo")
    assert bold[1].fontWeight() == QFont.Weight.Bold
    code = next(f for f in view_fragments(view) if f[0].startswith("def f"))
    assert code[1].fontFixedPitch(), "code is set in a fixed-width font"
    assert code[1].property(P_TOKEN) == 6, "code keeps its token"


def token_pieces(view: ChatView) -> list[tuple[str, int]]:
    """Each piece of a token's text in the document, as typed (a soft line break read back as
    the line break it was), with the token hover names for it."""
    return [(t.replace("\u2028", "\n"), i) for t, i, *_ in fragments(view) if i is not None]


def needless_splits(view: ChatView) -> list[str]:
    """Neighbouring pieces of one token that look the same and were still kept apart (they read
    as one piece, and as one span in the document's HTML, when a format per token was used)."""
    out = []
    block = view.document().begin()
    while block.isValid():
        pieces = list(block_tokens(block))
        for (a, ta), (b, tb) in zip(pieces, pieces[1:]):
            if ta is not None and ta == tb and looks(a.charFormat()) == looks(b.charFormat()):
                out.append(a.text() + b.text())
        block = block.next()
    return out


def looks(fmt: QTextCharFormat) -> QTextCharFormat:
    """The format less what only hover reads."""
    shown = QTextCharFormat(fmt)
    shown.clearProperty(P_TOKEN)
    shown.clearProperty(P_TOKEN_LOW)
    return shown


def within(shown: str, token: str) -> bool:
    """Whether `shown` is the token's text less some of it (markup, or a gap where two pieces of
    one token in the same look were joined)."""
    rest = iter(token)
    return all(c in rest for c in shown)


def token_chars(view: ChatView) -> list[tuple[str, object]]:
    """Every character of the document with the token that wrote it (None: none did)."""
    return [(c, i) for t, i, *_ in fragments(view) for c in t]


ANSWER = """## Plan

Use **bold**, *italic* and `inline code`; see [the docs](https://example.com).

1. First step
2. Second step
   - a nested point
   - another

| name | value |
|---|---|
| k | 4 |
| speed | 2.5x |

```python
def accept(draft, main):
    n = 0
    while n < len(draft) and draft[n] == main[n]:
        n += 1
    return draft[:n]
```

> A quote, then a rule:

---

```
plain code
```
Done."""


def test_a_markdown_answer_drawn_live_ends_as_its_one_shot_render(qtbot):
    """Headings, emphasis, links, nested lists, a table and two code blocks, cut into
    three-character tokens and shown a few at a time: the finished view is the one-shot view, with
    every character's token the same."""
    texts = [ANSWER[i : i + 3] for i in range(0, len(ANSWER), 3)]
    pieces = [(t, (M, D, L)[i % 3]) for i, t in enumerate(texts)]
    live = ChatView(Transcript())
    qtbot.addWidget(live)
    m = stream(live, pieces, list(range(5, len(pieces), 7)))
    live.transcript.finish_answer(m, MessageState.COMPLETE, AnswerStats())
    once = ChatView(Transcript([AnswerTurn(1, m.answer, state=MessageState.COMPLETE)]))
    qtbot.addWidget(once)
    once.rebuild()
    assert rendered(live) == rendered(once)
    assert token_chars(live) == token_chars(once)
    strays = [(text, token) for text, token in token_pieces(live) if not within(text, m.answer.parts[token])]
    assert strays == [], "every piece of text shown comes from the token hover names for it"
    assert not needless_splits(live), "streaming splits no text needlessly"
    assert not needless_splits(once), "drawing once splits no text needlessly"
    shown = live.toPlainText()
    assert "• a nested point" in shown, "a nested point shows with its bullet"
    assert "| speed | 2.5x |" in shown, "a table row shows as typed"
    assert "```" not in shown, "code fences are hidden"
    assert live.links.code == [ANSWER.split("```python\n")[1].split("\n```")[0], "plain code"]


def view_fragments(view: ChatView) -> list:
    out = []
    block = view.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            out.append((it.fragment().text(), it.fragment().charFormat()))
            it += 1
        block = block.next()
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=documents(), data=st.data())
def test_streamed_pieces_once_finished_render_as_the_whole_answer(qapp, doc, data):
    """Any text in any pieces: the finished stream is the one-shot render, and no batch re-reads
    more than the open block (an open code fence is never re-read: its lines are appended)."""
    text = doc.text
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=12), label="cuts")))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)]) if b > a]
    provs = data.draw(st.lists(st.sampled_from([M, D, L]), min_size=len(pieces), max_size=len(pieces)))
    batches = sorted(set(data.draw(st.lists(st.integers(1, len(pieces)), max_size=6), label="batches")))
    state = data.draw(st.sampled_from([MessageState.COMPLETE, MessageState.CANCELLED]))
    parsed: list[int] = []
    parse_open = live_markdown.parse_open
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(live_markdown, "parse_open", lambda t: (parsed.append(len(t)), parse_open(t))[1])
        live = ChatView(Transcript())
        m = stream(live, list(zip(pieces, provs)), batches)
    streamed_parses = parsed[:]
    live.transcript.finish_answer(m, state, AnswerStats())
    once = ChatView(Transcript([AnswerTurn(1, m.answer, state=state)]))
    once.rebuild()
    assert rendered(live) == rendered(once)
    assert token_chars(live) == token_chars(once)
    strays = [(text, token) for text, token in token_pieces(once) if not within(text, m.answer.parts[token])]
    assert strays == [], "every piece of text shown comes from the token hover names for it"
    prose = max((len(c) for c in text.split("\n\n") if not c.startswith("```")), default=0)
    ends = [0, *batches, len(pieces)]
    batch = max(sum(map(len, pieces[a:b])) for a, b in zip(ends, ends[1:]))  # the most new text at once
    # a fence opened at the end of one batch is read whole with the next batch's text: two batches
    assert max(streamed_parses, default=0) <= prose + 2 * batch + 2
    live.deleteLater()
    once.deleteLater()


def test_a_long_open_code_block_costs_each_batch_only_its_new_lines(qtbot, monkeypatch):
    parsed: list[int] = []
    parse_open = live_markdown.parse_open
    monkeypatch.setattr(live_markdown, "parse_open", lambda t: (parsed.append(len(t)), parse_open(t))[1])
    view = ChatView(Transcript())
    qtbot.addWidget(view)
    lines = [(f"    total += {n}", M if n % 2 else D) for n in range(3000)]
    pieces = [("Sum:\n\n```python\ndef f():\n", M)] + [(t + "\n", p) for t, p in lines]
    m = stream(view, pieces, list(range(1, len(pieces))))
    # after the fence opened, lines were only appended
    assert len(parsed) < 5, "an open code block is parsed only a few times"
    assert max(parsed) < 100, "each parse is only of the new lines"
    assert view.toPlainText().endswith("    total += 2998\n    total += 2999\n")
    m.answer.add(TokenEvent(len(pieces), "```\nDone.", M, 0.0, 0, len(pieces)))
    view.transcript.extend_answer(m, len(pieces) + 1)
    assert max(parsed) < 100  # closing the fence drew the block once, without parsing it again
    view.transcript.finish_answer(m, MessageState.COMPLETE, AnswerStats())
    assert view.links.code == ["def f():\n" + "".join(t + "\n" for t, _ in lines).removesuffix("\n")]
    assert view.toPlainText().rstrip().splitlines()[-2] == "Done."


def test_an_answer_stopped_inside_a_code_block_keeps_its_code(qtbot):
    view = ChatView(Transcript())
    qtbot.addWidget(view)
    pieces = [("Here:\n\n", M), ("```python\n", M), ("def f(x):\n", D), ("    return x", M)]
    m = stream(view, pieces, [1, 2, 3])
    view.transcript.finish_answer(m, MessageState.CANCELLED, AnswerStats())
    shown = view.toPlainText()
    assert "Assistant  · stopped" in shown, "a stopped answer says it was stopped"
    assert "python   Copy code" in shown, "its open code block shows its language and copy link"
    assert "def f(x):\n    return x" in shown, "the code written so far is shown"
    assert "```" not in shown, "code fences are hidden"
    assert view.links.code == ["def f(x):\n    return x"]
