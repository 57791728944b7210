"""Markdown while an answer streams: finished blocks are drawn once, only the open part is redone.

The answer's text is cut where more text cannot change what came before (`parse_open`): blocks
before the cut are final and stay in the document; the part after it is removed and drawn again on
each batch. An open code fence is the exception, as it may grow for thousands of lines: its new
characters are appended as plain code text until its closing line comes, and only then is the
whole block drawn once more with its colours and copy button.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtGui import QTextCharFormat, QTextCursor, QTextDocument

from app.engine.store.provenance import Answer
from app.ui.chat.text.markdown import Block, Span, fence_closes, fence_marker, parse_open
from app.ui.chat.text.render import Links, Painter


@dataclass(slots=True)
class _OpenFence:
    start: int  # where the fence line starts (the open part's start)
    closing: str
    lang: str
    body: int  # where its first code line starts
    line: int  # the first line not yet checked for the closing fence
    searched: int  # the text up to here holds no line break after `line`
    shown: int  # code characters drawn so far end here


def _shifted(block: Block, by: int) -> Block:
    spans = tuple(Span(s.start + by, s.end + by, s.style, s.href) for s in block.spans)
    return replace(block, spans=spans)


class LiveAnswer:
    """Draws one streaming answer from a document position on; the answer is the document's end."""

    def __init__(self, painter: Painter, base: QTextCharFormat, links: Links) -> None:
        self.painter, self.base, self.links = painter, base, links
        self.doc: QTextDocument = painter.cursor.document()
        self.after: bool | None = None  # whether the last final block was code (None: none yet)
        self.begin = 0  # the answer's text from here on is the open part, `tail`
        self.tail = ""
        self.painted = 0  # tokens drawn
        self.rejected: dict[int, str] = {}
        self._rejected_seen = 0
        self.fence: _OpenFence | None = None
        self.parsed: list[int] = []  # characters handed to the parser, per batch (for tests)
        self._mark(painter.cursor.position())

    @property
    def end(self) -> int:
        return self.begin + len(self.tail)

    def _mark(self, position: int) -> None:
        """The open part starts here; its block's look is kept to restore after each removal."""
        self.position = position
        cursor = QTextCursor(self.doc)
        cursor.setPosition(position)
        self._block_format, self._char_format = cursor.blockFormat(), cursor.blockCharFormat()

    def _clear_open(self) -> QTextCursor:
        cursor = self.painter.cursor
        cursor.setPosition(self.position)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        self.painter.forget_place()
        cursor.setBlockFormat(self._block_format)
        cursor.setBlockCharFormat(self._char_format)
        return cursor

    def grow(self, answer: Answer, ready: int) -> None:
        """Draw tokens up to `ready` (their rounds are over)."""
        if ready <= self.painted:
            return
        self.tail += "".join(answer.parts[self.painted : ready])
        self.painted = ready
        if self.painter.options.show_rejected:
            self.rejected.update(answer.rejected[self._rejected_seen :])
            self._rejected_seen = len(answer.rejected)
        if self.fence is None or self._grow_fence(answer):
            self._redraw(answer, final=False)

    def finish(self, answer: Answer) -> bool:
        """Draw the rest as final blocks; False when the drawn text no longer matches the answer
        (the last token gained held-back text), and the caller draws it whole again."""
        self.grow(answer, len(answer.parts))
        if self.end != answer.length:
            return False
        if self.fence is not None:
            self.fence = None
        self._redraw(answer, final=True)
        return True

    def _grow_fence(self, answer: Answer) -> bool:
        """Append an open fence's new code; True when its closing line came (the caller redraws)."""
        f = self.fence
        assert f is not None
        while True:
            nl = self.tail.find("\n", max(f.line, f.searched) - self.begin)
            if nl < 0:
                f.searched = self.end
                break
            nl += self.begin
            if fence_closes(self.tail[f.line - self.begin : nl - self.begin], f.closing):
                self._close_fence(answer, f, nl)
                return True
            f.line = f.searched = nl + 1
        self.painter.cursor.movePosition(QTextCursor.MoveOperation.End)
        self._use_source()
        code = self.painter.code_format(self.base)
        self.painter._slice(answer, f.shown, self.end, code, self.rejected)
        f.shown = self.end
        return False

    def _close_fence(self, answer: Answer, f: _OpenFence, closing_line: int) -> None:
        """The fence closed: the same block the parser makes, drawn final, once."""
        span = Span(f.body, f.line - 1) if f.line > f.body else Span(f.start, f.start)
        block = Block("code", (replace(span, style=frozenset({"code"})),), lang=f.lang)
        self._clear_open()
        self._use_source()
        self.after = self.painter.block(answer, block, self.base, self.links, self.rejected, self.after)
        self.tail = self.tail[closing_line + 1 - self.begin :]
        self.begin = closing_line + 1
        self.fence = None
        self._mark(self.doc.characterCount() - 1)

    def _use_source(self) -> None:
        self.painter.source, self.painter.origin = self.tail, self.begin

    def _redraw(self, answer: Answer, final: bool) -> None:
        self.parsed.append(len(self.tail))
        blocks, settled, cut = parse_open(self.tail)
        blocks = [_shifted(b, self.begin) for b in blocks]
        if final:
            settled = len(blocks)
        self._clear_open()
        self._use_source()
        for block in blocks[:settled]:
            self.after = self.painter.block(answer, block, self.base, self.links, self.rejected, self.after)
        self._mark(self.doc.characterCount() - 1)
        after = self.after
        for block in blocks[settled:]:
            after = self.painter.block(answer, block, self.base, self.links, self.rejected, after, live=True)
        if not final:
            self.tail, self.begin = self.tail[cut:], self.begin + cut
        last = blocks[-1] if blocks[settled:] else None
        if last is not None and last.kind == "code" and last.unclosed and "\n" in self.tail:
            first = self.tail.index("\n")
            line = self.begin + self.tail.rindex("\n") + 1
            self.fence = _OpenFence(
                self.begin,
                fence_marker(self.tail[:first]),
                last.lang,
                self.begin + first + 1,
                line,
                line,
                self.end,
            )
