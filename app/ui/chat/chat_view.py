"""The transcript's view: one QTextBrowser, appended to incrementally, never re-rendered per token.

It draws a `Transcript` (app.engine.store.transcript) that the chat controller owns, following
its change notifications; it keeps no copy of the conversation. Only the last message changes
while streaming, drawn as markdown as it grows (app.ui.chat.text.live_markdown). The browser loads nothing:
`loadResource` answers every URL with nothing and links go through a confirmation before the
system browser sees them.

It is one module past 400 lines because drawing a turn, its token tint, its action links and the
hover that reads them back all work on the same document positions; the text's own layout
(markdown, long runs, bubbles) is already in app.ui.chat.text.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QUrl, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QContextMenuEvent,
    QDesktopServices,
    QFont,
    QGuiApplication,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextFormat,
)
from PySide6.QtWidgets import QMessageBox, QTextBrowser, QTextEdit, QToolTip, QWidget

from app.engine.store.transcript import (
    AnswerStats,
    AnswerTurn,
    Change,
    MessageState,
    Transcript,
    Turn,
    UserTurn,
)
from app.ui.chat.stats import DIVERGENCE, stats_line, verdict_line
from app.ui.chat.text.bubble import close_bubble, open_bubble
from app.ui.chat.text.ghosts import ghost_lines
from app.ui.chat.text.live_markdown import LiveAnswer
from app.ui.chat.text.long_text import SHOWN_CHARS as SHOWN_CHARS  # re-exported: tests measure the preview
from app.ui.chat.text.long_text import is_long, preview
from app.ui.chat.text.render import (
    P_MESSAGE,
    P_PROV,
    P_TOKEN,
    Links,
    Options,
    Painter,
    block_tokens,
    token_at,
)
from app.ui.chat.text.wrapping import LONG_RUN, has_long_run, wrap_anywhere
from app.ui.common.stats_words import ACTION_LABELS, answer_line
from app.ui.common.theme import Theme, current_theme

SAFE_SCHEMES = ("http", "https", "mailto")
NOTES = {
    MessageState.PARTIAL: "  · interrupted",
    MessageState.CANCELLED: "  · stopped",
    MessageState.ERROR: "  · failed",
}


class ChatView(QTextBrowser):
    action = Signal(str, int)  # "edit" | "regenerate" | "copymsg" | "check" | "cancelcheck", message key

    def __init__(self, transcript: Transcript, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.transcript = transcript  # read, never changed here: the chat controller owns it
        transcript.observers.append(self._on_change)
        self.destroyed.connect(lambda: transcript.observers.remove(self._on_change))
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setSearchPaths([])
        self.setMouseTracking(True)
        self.document().setDocumentMargin(14)
        self.anchorClicked.connect(self._on_anchor)
        self.theme: Theme = current_theme()
        self.options = Options()
        self.links = Links()
        self.resource_requests: list[str] = []  # what output asked to load (never loaded)
        self.confirm_link = self._confirm  # replaced in tests
        self._live_header = self._painted = 0
        self._run_tail = ""  # the live answer's last characters without a space, up to LONG_RUN + 1
        self._live: LiveAnswer | None = None
        self._note_at = 0  # where the live answer's header takes its note once it stops

    # -- safety ---------------------------------------------------------------------------------
    def loadResource(self, kind: int, url: QUrl | str) -> Any:
        """Nothing is ever loaded: not files, not network, not data URLs."""
        self.resource_requests.append(url.toString() if isinstance(url, QUrl) else str(url))
        return None

    def _confirm(self, url: str) -> bool:
        answer = QMessageBox.question(
            self,
            "Open link?",
            f"The model's answer links to:\n\n{url}\n\nOpen it in your browser?",
            QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Cancel,
        )
        return answer == QMessageBox.StandardButton.Open

    def _on_anchor(self, url: QUrl) -> None:
        text = url.toString()
        kind, _, arg = text.removeprefix("specchat:").partition("/")
        if not text.startswith("specchat:") or not arg.isdigit():
            return
        n = int(arg)
        if kind == "copy" and n < len(self.links.code):
            QGuiApplication.clipboard().setText(self.links.code[n])
        elif kind == "link" and n < len(self.links.urls):
            target = QUrl(self.links.urls[n])
            if target.scheme().lower() not in SAFE_SCHEMES:
                QMessageBox.information(
                    self, "Link not opened", f"SpecChat only opens web links:\n\n{self.links.urls[n]}"
                )
            elif self.confirm_link(self.links.urls[n]):
                QDesktopServices.openUrl(target)
        elif kind in ("edit", "regenerate", "copymsg", "check", "cancelcheck"):
            self.action.emit(kind, n)

    # -- building -------------------------------------------------------------------------------
    def _on_change(self, change: Change, turn: Turn | None) -> None:
        if change is Change.RESET or turn is None:
            self.rebuild()
        elif change is Change.APPENDED:
            self._insert(turn)
            self.scroll_to_end()
        elif change is Change.EXTENDED and isinstance(turn, AnswerTurn):
            self.paint_live(turn)
        elif change is Change.FINISHED and isinstance(turn, AnswerTurn):
            self.finish_live(turn)
        elif change is Change.UPDATED:
            self.refresh()

    def set_options(self, options: Options) -> None:
        self.options = options
        self.rebuild()

    def set_theme(self, theme: Theme) -> None:
        if theme != self.theme:  # the palette change and the Appearance menu report one switch
            self.theme = theme
            self.rebuild()

    def rebuild(self) -> None:
        """Whole transcript: on load, option or theme changes, edits; never per token."""
        self.document().clear()
        wrap_anywhere(self, False)
        self.links = Links()
        edit = QTextCursor(self.document())
        edit.beginEditBlock()  # one layout pass for the whole transcript
        for turn in self.transcript:
            self._insert(turn)
        edit.endEditBlock()
        self.scroll_to_end()
        self._mark_divergences()

    def refresh(self) -> None:
        """Rebuild in place (a verdict arrived): the reader's scroll position is kept."""
        bar = self.verticalScrollBar()
        value = bar.value()
        self.rebuild()
        bar.setValue(min(value, bar.maximum()))

    def token_range(self, key: int, index: int) -> tuple[int, int] | None:
        """Document span of token `index` of message `key` (first to last character it produced)."""
        return self.token_ranges({key: index}).get(key)

    def token_ranges(self, wanted: dict[int, int]) -> dict[int, tuple[int, int]]:
        """Spans of one token per message ({key: token index}) in one pass over the document: a
        pass per message made a transcript of many checked answers quadratic to draw."""
        spans: dict[int, tuple[int, int]] = {}
        block = self.document().begin() if wanted else self.document().end()
        while block.isValid():
            for frag, token in block_tokens(block):
                key = frag.charFormat().property(P_MESSAGE)
                if key in wanted and token == wanted[key]:
                    end = frag.position() + frag.length()
                    spans[key] = (spans[key][0], end) if key in spans else (frag.position(), end)
            block = block.next()
        return spans

    def _mark_divergences(self) -> None:
        """Underline each answer's first divergence from plain decoding (an overlay, not the text)."""
        marks = []
        wanted = {
            m.key: m.stats.lossless.position
            for m in self.transcript
            if isinstance(m, AnswerTurn) and m.stats.lossless and m.stats.lossless.position is not None
        }
        for span in self.token_ranges(wanted).values():
            selection = QTextEdit.ExtraSelection()
            selection.cursor = QTextCursor(self.document())
            selection.cursor.setPosition(span[0])
            selection.cursor.setPosition(span[1], QTextCursor.MoveMode.KeepAnchor)
            tint = QColor(DIVERGENCE)
            tint.setAlpha(70)
            selection.format.setBackground(QBrush(tint))
            selection.format.setUnderlineStyle(QTextCharFormat.UnderlineStyle.WaveUnderline)
            selection.format.setUnderlineColor(QColor(DIVERGENCE))
            selection.format.setProperty(QTextFormat.Property.FullWidthSelection, False)
            marks.append(selection)
        self.setExtraSelections(marks)

    def _base(self) -> QTextCharFormat:
        fmt = QTextCharFormat()
        fmt.setForeground(QBrush(self.theme.text))
        return fmt

    def _cursor(self) -> QTextCursor:
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        return cursor

    def _header(self, cursor: QTextCursor, m: Turn) -> None:
        block = QTextBlockFormat()
        block.setTopMargin(18)
        block.setBottomMargin(2)
        if not cursor.atStart():
            cursor.insertBlock(block)
        else:
            cursor.setBlockFormat(block)
        fmt = self._base()
        fmt.setFontWeight(QFont.Weight.Bold)
        fmt.setProperty(P_MESSAGE, m.key)
        cursor.insertText("You" if isinstance(m, UserTurn) else "Assistant", fmt)
        self._note_at = cursor.position()
        note = "" if isinstance(m, AnswerTurn) and m.live else NOTES.get(m.state, "")
        if note:
            muted = self._base()
            muted.setForeground(QBrush(self.theme.muted))
            cursor.insertText(note, muted)
        cursor.insertBlock(QTextBlockFormat(), self._base())  # a note added later changes nothing

    def _actions(self, cursor: QTextCursor, m: Turn) -> None:
        names = (
            ("edit",)
            if isinstance(m, UserTurn)
            else ("regenerate", "copymsg", "cancelcheck" if m.checking else "check")
        )
        cursor.insertBlock(QTextBlockFormat())
        for name in names:
            fmt = self._base()
            fmt.setForeground(QBrush(self.theme.muted))
            fmt.setFontPointSize(max(self.font().pointSizeF() - 1, 7))
            fmt.setAnchor(True)
            fmt.setAnchorHref(f"specchat:{name}/{m.key}")
            cursor.insertText(ACTION_LABELS[name], fmt)
            cursor.insertText("   ", self._base())
        if isinstance(m, AnswerTurn) and m.stats.tokens:  # speed, speedup, the draft's share
            fmt.setAnchor(False)
            cursor.insertText(answer_line(m.stats), fmt)
        line = verdict_line(m.stats, m.checking) if isinstance(m, AnswerTurn) else None
        if line is not None:
            fmt = self._base()
            fmt.setForeground(QBrush(QColor(line[1]) if line[1] else self.theme.muted))
            fmt.setFontPointSize(max(self.font().pointSizeF() - 1, 7))
            fmt.setProperty(P_MESSAGE, m.key)
            cursor.insertBlock(QTextBlockFormat())
            cursor.insertText(line[0], fmt)

    def _insert(self, m: Turn) -> None:
        # A long user message shows its start (app.ui.chat.text.long_text); the whole of it was sent and saved.
        shown = preview(m.text) if isinstance(m, UserTurn) and is_long(m.text) else m.text
        if has_long_run(shown):  # wrapping a long run at word boundaries is quadratic
            wrap_anywhere(self, True)
        cursor = self._cursor()
        self._live_header = cursor.position()
        self._header(cursor, m)
        if isinstance(m, UserTurn):
            cursor = open_bubble(cursor, self.theme)
            fmt = self._base()
            fmt.setProperty(P_MESSAGE, m.key)
            cursor.insertText(shown, fmt)
            if len(m.text) > len(shown):
                muted = self._base()
                muted.setForeground(QBrush(self.theme.muted))
                more = len(m.text) - len(shown)
                cursor.insertText(f" … and {more:,} more characters, sent in full", muted)
            cursor = self._cursor()  # out of the bubble
            close_bubble(cursor)
            self._actions(cursor, m)
        elif m.live:
            self._painted, self._run_tail = 0, ""
            painter = Painter(cursor, self.theme, self.options, m.key)
            self._live = LiveAnswer(painter, self._base(), self.links)
            self.paint_live(m)
        else:
            Painter(cursor, self.theme, self.options, m.key).markdown(m.answer, self._base(), self.links)
            self._actions(cursor, m)

    # -- streaming ------------------------------------------------------------------------------
    def paint_live(self, m: AnswerTurn) -> None:
        """Append the live answer's settled tokens not painted yet; cheap, called once per batch."""
        ready = m.settled
        if ready <= self._painted:
            return
        at_end = self._at_end()
        text = self._run_tail + "".join(m.answer.parts[self._painted : ready])
        if has_long_run(text):
            wrap_anywhere(self, True)
        tail = text[-LONG_RUN - 1 :]
        self._run_tail = tail.split()[-1] if tail.strip() and not tail[-1].isspace() else ""
        cursor = self._cursor()
        cursor.beginEditBlock()  # the batch is laid out once, not once per token
        if self._live is not None:
            self._live.grow(m.answer, ready)
        cursor.endEditBlock()
        self._painted = ready
        if at_end:
            self.scroll_to_end()

    def finish_live(self, m: AnswerTurn) -> None:
        """Draw the open part as final blocks; what was final already stays as it is."""
        at_end = self._at_end()
        cursor = QTextCursor(self.document())
        cursor.beginEditBlock()
        self.paint_live(m)  # the last tokens, and the wrapping check over them
        live, self._live = self._live, None
        if live is not None and live.finish(m.answer):
            muted = self._base()
            muted.setForeground(QBrush(self.theme.muted))
            cursor.setPosition(self._note_at)
            cursor.insertText(NOTES.get(m.state, ""), muted)  # "· stopped" and the like
            self._actions(self._cursor(), m)
        else:  # redraw the whole answer
            cursor.setPosition(self._live_header)
            cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
            cursor.removeSelectedText()
            self._insert(m)
        cursor.endEditBlock()
        if at_end:
            self.scroll_to_end()

    def _at_end(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - 4

    def scroll_to_end(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    # -- hover ----------------------------------------------------------------------------------
    def info_at(self, position: int) -> dict[str, Any] | None:
        """Provenance, round and message of the character at a document position."""
        cursor = QTextCursor(self.document())
        cursor.setPosition(min(position + 1, self.document().characterCount() - 1))
        fmt = cursor.charFormat()  # the character before, or after at a line's start
        key = fmt.property(P_MESSAGE)
        if key is None:
            return None
        info: dict[str, Any] = {"message": int(key)}
        block = cursor.block()
        at = cursor.position() if cursor.atBlockStart() and block.length() > 1 else cursor.position() - 1
        token = token_at(self.document(), at)
        if token is None and fmt.property(P_TOKEN) is not None:  # a line break: never in a fragment
            token = int(fmt.property(P_TOKEN))
        message = self.transcript.answer(int(key))
        if token is not None and message is not None and token < len(message.answer.rounds):
            info.update(
                token=token,
                provenance=str(fmt.property(P_PROV)),
                round=message.answer.rounds[token],
            )
        return info

    def tooltip_for(self, info: dict[str, Any]) -> str:
        lines = []
        if "token" in info:
            who = {"main": "main model", "draft": "draft (accepted)", "lookup": "prompt lookup (accepted)"}
            lines.append(
                f"Token {info['token']} · {who.get(info['provenance'], info['provenance'])} · round {info['round']}"
            )
        message = self.transcript.answer(info["message"])
        if message is not None and "token" in info and self.options.show_rejected:
            lines += ghost_lines(message.answer, info["round"])  # after the first line: never rich text
        if message is not None and message.stats != AnswerStats():
            lines.append(stats_line(message.stats))
        return "\n".join(lines)

    def contextMenuEvent(self, e: QContextMenuEvent) -> None:
        """The standard menu, plus the answer's own actions when the click is on an answer."""
        menu = self.createStandardContextMenu(e.pos())
        info = self.info_at(self.cursorForPosition(e.pos()).position())
        m = self.transcript.answer(info["message"]) if info else None
        if m is not None and not m.live:
            menu.addSeparator()
            if m.checking:
                menu.addAction("Cancel losslessness check", lambda: self.action.emit("cancelcheck", m.key))
            else:
                menu.addAction("Check losslessness", lambda: self.action.emit("check", m.key))
            menu.addAction("Regenerate", lambda: self.action.emit("regenerate", m.key))
        menu.exec(e.globalPos())
        menu.deleteLater()

    def viewportEvent(self, e: QEvent) -> bool:
        if e.type() == QEvent.Type.ToolTip:
            info = self.info_at(self.cursorForPosition(e.pos()).position())  # type: ignore[attr-defined]
            text = self.tooltip_for(info) if info else ""
            if text:
                QToolTip.showText(e.globalPos(), text, self)  # type: ignore[attr-defined]
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(e)
