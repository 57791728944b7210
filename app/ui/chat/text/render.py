"""Writing messages into the transcript's QTextDocument through a cursor, never through HTML.

Text is inserted with `insertText`, so markup in model output stays text and no resource is ever
requested. Each character an answer token produced carries that token's provenance and its index
as user properties, and its colour comes from its token's format, so highlighting is exact per
token both while streaming and after markdown rendering. The index is whole only on a block's
first token piece; the pieces after it carry it modulo TOKEN_CYCLE (`block_tokens` reads them).
A whole index on every piece made every token's format unique, and the document kept each one:
about 0.6 KB per token, most of a long answer's memory.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QTextBlock,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextFragment,
)

from app.engine.decoding.events import Provenance
from app.engine.store.provenance import Answer
from app.ui.chat.text.markdown import Block, Span, parse
from app.ui.common.theme import Theme

P_TOKEN = QTextFormat.Property.UserProperty + 1  # token index in its answer, on a block's first piece
P_PROV = QTextFormat.Property.UserProperty + 2  # "main", "draft" or "lookup"
P_MESSAGE = QTextFormat.Property.UserProperty + 4  # the message's key in the view
P_REJECTED = QTextFormat.Property.UserProperty + 5  # the main model refused the draft's guess here
# on a piece right after another token's piece in its block: the index modulo TOKEN_CYCLE
P_TOKEN_LOW = QTextFormat.Property.UserProperty + 6
TOKEN_CYCLE = 16  # more than the tokens markup hides between two shown ones, bar a long link
# where Qt's insertText starts a new block ("\r\n" is one)
_SEPARATORS = re.compile("\r\n|[\n\r\u2029\ufdd0\ufdd1]")

try:  # Pygments arrives with rich; without it code is still shown, just uncoloured
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound
except ImportError:  # pragma: no cover
    get_lexer_by_name = None


@dataclass(frozen=True, slots=True)
class Options:
    highlight: bool = True
    show_rejected: bool = False


@dataclass
class Links:
    """Model-supplied URLs live here; anchors only carry an index, so output cannot fake an action."""

    urls: list[str] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    _known: dict[str, int] = field(default_factory=dict)  # the live answer links again each tick

    def link(self, url: str) -> str:
        if url not in self._known:
            self._known[url] = len(self.urls)
            self.urls.append(url)
        return f"specchat:link/{self._known[url]}"

    def copy(self, code: str) -> str:
        self.code.append(code)
        return f"specchat:copy/{len(self.code) - 1}"


@functools.lru_cache(maxsize=64)
def _lexer(lang: str) -> Any:
    """Looking a lexer up costs milliseconds; a long answer has hundreds of code blocks."""
    try:
        return get_lexer_by_name(lang, stripnl=False, stripall=False, ensurenl=False)
    except ClassNotFound:
        return None


def mono() -> QFont:
    font = QFont("Menlo")
    font.setStyleHint(QFont.StyleHint.Monospace)
    font.setFixedPitch(True)
    return font


def block_tokens(block: QTextBlock) -> Iterator[tuple[QTextFragment, int | None]]:
    """Each fragment of the block, in order, with the index of the token that wrote it (None:
    not a token's text). A piece without its whole index follows a token's piece by less than
    TOKEN_CYCLE tokens (`Painter` writes it so), which fixes the index from its low part."""
    last: int | None = None
    it = block.begin()
    while not it.atEnd():
        fragment = it.fragment()
        fmt = fragment.charFormat()
        whole, low = fmt.property(P_TOKEN), fmt.property(P_TOKEN_LOW)
        token: int | None = None
        if whole is not None:
            token = int(whole)
        elif low is not None and last is not None:
            token = last + (int(low) - last) % TOKEN_CYCLE
        last = token if token is not None else last
        yield fragment, token
        it += 1


def token_at(document: QTextDocument, position: int) -> int | None:
    """Index of the token that wrote the character at `position` (None: no token's text)."""
    for fragment, token in block_tokens(document.findBlock(position)):
        if fragment.position() <= position < fragment.position() + fragment.length():
            return token
    return None


class Painter:
    """Inserts one message; keeps formats cached per provenance so a batch is cheap."""

    def __init__(self, cursor: QTextCursor, theme: Theme, options: Options, key: int) -> None:
        self.cursor, self.theme, self.options, self.key = cursor, theme, options, key
        # the answer's text from `origin` on: the live view keeps only its open part, so that a
        # tick never joins the whole answer
        self.source, self.origin = "", 0
        self.backgrounds = {
            Provenance.DRAFT: QBrush(theme.draft_bg),
            Provenance.LOOKUP: QBrush(theme.lookup_bg),
        }
        # where the last token piece ends, its token, its look, and whether it had the whole index
        self._after: tuple[int, int, QTextCharFormat, bool] | None = None

    def forget_place(self) -> None:
        """Text was removed: the next token piece carries its whole index."""
        self._after = None

    def token_format(
        self, base: QTextCharFormat, answer: Answer, index: int, refused: bool = False, whole: bool = True
    ) -> QTextCharFormat:
        fmt = QTextCharFormat(base)
        prov = answer.provenance[index]
        if self.options.highlight and prov in self.backgrounds:
            fmt.setBackground(self.backgrounds[prov])
        if whole:
            fmt.setProperty(P_TOKEN, index)
        else:
            fmt.setProperty(P_TOKEN_LOW, index % TOKEN_CYCLE)
        fmt.setProperty(P_PROV, prov.value)
        fmt.setProperty(P_MESSAGE, self.key)
        if refused:
            # A dotted underline marks the spot; the refused text is in the tooltip (app.ui.chat.text.ghosts),
            # never inline, so the answer reads as it was written.
            fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.DotLine)
            fmt.setUnderlineColor(self.theme.rejected)
            fmt.setProperty(P_REJECTED, True)
        return fmt

    # -- markdown -------------------------------------------------------------------------------
    def markdown(self, answer: Answer, base: QTextCharFormat, links: Links) -> None:
        self.source, self.origin = answer.text, 0
        rejected = {i: t for i, t in answer.rejected} if self.options.show_rejected else {}
        after: bool | None = None
        for block in parse(self.source):
            after = self.block(answer, block, base, links, rejected, after)

    def block(
        self,
        answer: Answer,
        block: Block,
        base: QTextCharFormat,
        links: Links,
        rejected: dict[int, str],
        after: bool | None,
        live: bool = False,
    ) -> bool:
        """One block; `after`: None for the answer's first, else whether the one before was code.
        A `live` code block may still grow: no colours and no copy button until it is whole.
        Returns whether this block is code, for the next one's spacing."""
        if after is not None:
            spaced = QTextBlockFormat()
            spaced.setTopMargin(8 if after else 0)  # every code line shares one format: space goes here
            self.cursor.insertBlock(spaced, base)
        if block.kind == "code":
            self._code(answer, block, base, links, rejected, live)
        elif block.kind == "hr":
            fmt = QTextBlockFormat()
            fmt.setProperty(QTextFormat.Property.BlockTrailingHorizontalRulerWidth, 1)
            self.cursor.setBlockFormat(fmt)
        else:
            self._prose(answer, block, base, links, rejected)
        return block.kind == "code"

    def _prose(
        self, answer: Answer, block: Block, base: QTextCharFormat, links: Links, rejected: dict[int, str]
    ) -> None:
        fmt = QTextBlockFormat(self.cursor.blockFormat())
        fmt.setBottomMargin(4)
        char = QTextCharFormat(base)
        if block.kind == "h":
            char.setFontWeight(QFont.Weight.Bold)
            char.setFontPointSize(max(base.font().pointSizeF(), 10) * (1.5 - 0.1 * block.level))
        if block.kind == "li":
            fmt.setIndent(block.level + 1)
            fmt.setTextIndent(-14)
        if block.kind == "quote":
            fmt.setLeftMargin(16)
            char.setForeground(QBrush(self.theme.muted))
        self.cursor.setBlockFormat(fmt)
        if block.kind == "li":
            marker = "• " if block.marker in "-*+" else f"{block.marker} "
            muted = QTextCharFormat(base)
            muted.setForeground(QBrush(self.theme.muted))
            self.cursor.insertText(marker, muted)
        anchors: dict[str, str] = {}
        for span in block.spans:
            fmt_span = self._span_format(char, span, links, anchors)
            self._slice(answer, span.start, span.end, fmt_span, rejected, soft_breaks=True)

    def _span_format(
        self, char: QTextCharFormat, span: Span, links: Links, anchors: dict[str, str]
    ) -> QTextCharFormat:
        fmt = QTextCharFormat(char)
        if "bold" in span.style:
            fmt.setFontWeight(QFont.Weight.Bold)
        if "italic" in span.style:
            fmt.setFontItalic(True)
        if "code" in span.style:
            fmt.setFontFamilies(mono().families())
            fmt.setFontFixedPitch(True)
        if span.href is not None:
            if span.href not in anchors:
                anchors[span.href] = links.link(span.href)
            fmt.setAnchor(True)
            fmt.setAnchorHref(anchors[span.href])
            fmt.setForeground(QBrush(self.theme.link))
            fmt.setFontUnderline(True)
            fmt.setToolTip(("Image (not loaded): " if "image" in span.style else "Link: ") + span.href)
        return fmt

    def _slice(
        self,
        answer: Answer,
        start: int,
        end: int,
        fmt: QTextCharFormat,
        rejected: dict[int, str],
        soft_breaks: bool = False,
    ) -> None:
        """Insert answer.text[start:end] cut at token boundaries, each piece in its token's format."""
        pos = start
        while pos < end:
            i = answer.token_at(pos)
            token_end = answer.starts[i] + len(answer.parts[i])
            stop = min(end, token_end)
            piece = answer.parts[i][pos - answer.starts[i] : stop - answer.starts[i]]
            if soft_breaks:
                piece = piece.replace("\n", "\u2028")
            if piece:
                self._token_text(piece, fmt, answer, i, i in rejected)
            if stop <= pos:  # an empty token at this offset: step past it
                stop = pos + 1
            pos = stop

    def _token_text(self, text: str, fmt: QTextCharFormat, answer: Answer, index: int, refused: bool) -> None:
        """Insert a piece of token `index`'s text. A block separator goes in alone with the whole
        index, so that a block's first piece, and an empty line, always has it."""
        cursor, pos = self.cursor, 0
        while pos < len(text):
            separator = _SEPARATORS.search(text, pos)
            end = separator.start() if separator else len(text)
            whole = True
            if end > pos:
                after = self._after
                if (
                    after is not None
                    and after[0] == cursor.position()
                    and 0 <= index - after[1] < TOKEN_CYCLE
                    and not cursor.atBlockStart()
                ):  # the same token in the same look goes on as it began, so that the pieces join
                    whole = after[3] if index == after[1] and fmt == after[2] else False
                cursor.insertText(text[pos:end], self.token_format(fmt, answer, index, refused, whole))
            if separator is None:
                break
            whole = True
            cursor.insertText(separator.group(), self.token_format(fmt, answer, index, refused))
            pos = separator.end()
        self._after = (cursor.position(), index, fmt, whole)

    def code_format(self, base: QTextCharFormat) -> QTextCharFormat:
        code_fmt = QTextCharFormat(base)
        code_fmt.setFontFamilies(mono().families())
        code_fmt.setFontFixedPitch(True)
        return code_fmt

    def _code(
        self,
        answer: Answer,
        block: Block,
        base: QTextCharFormat,
        links: Links,
        rejected: dict[int, str],
        live: bool = False,
    ) -> None:
        span = block.spans[0]
        code = self.source[span.start - self.origin : span.end - self.origin]
        header = QTextBlockFormat()
        header.setTopMargin(6)
        header.setBackground(QBrush(self.theme.code_bg))
        self.cursor.setBlockFormat(header)
        muted = QTextCharFormat(base)
        muted.setForeground(QBrush(self.theme.muted))
        self.cursor.insertText(f"{block.lang or 'code'}   ", muted)
        if not live:
            button = QTextCharFormat(muted)
            button.setAnchor(True)
            button.setAnchorHref(links.copy(code))
            button.setForeground(QBrush(self.theme.link))
            button.setToolTip("Copy this code")
            self.cursor.insertText("Copy code", button)
        body = QTextBlockFormat()
        body.setBackground(QBrush(self.theme.code_bg))
        body.setLeftMargin(8)
        body.setNonBreakableLines(True)
        code_fmt = self.code_format(base)
        self.cursor.insertBlock(body, code_fmt)
        for a, b, kind in self._lexed(code, "" if live else block.lang):
            fmt = QTextCharFormat(code_fmt)
            colour = self._syntax_colour(kind)
            if colour is not None:
                fmt.setForeground(QBrush(colour))
            self._slice(answer, span.start + a, span.start + b, fmt, rejected)

    def _lexed(self, code: str, lang: str) -> list[tuple[int, int, str]]:
        if get_lexer_by_name is None or not lang:
            return [(0, len(code), "")]
        lexer = _lexer(lang.lower())
        if lexer is None:
            return [(0, len(code), "")]
        out, pos = [], 0
        for index, kind, value in lexer.get_tokens_unprocessed(code):
            if index != pos or index + len(value) > len(code):  # the lexer rewrote text: give up colouring
                return [(0, len(code), "")]
            out.append((index, index + len(value), str(kind)))
            pos = index + len(value)
        return out if pos == len(code) else [(0, len(code), "")]

    def _syntax_colour(self, kind: str) -> QColor | None:
        name = kind.removeprefix("Token.")
        while name:
            if name in self.theme.syntax:
                return self.theme.syntax[name]
            name = name.rpartition(".")[0]
        return None
