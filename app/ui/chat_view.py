"""The transcript: one QTextBrowser, appended to incrementally, never re-rendered per token.

Only the last message changes while streaming; a finished answer is re-rendered once, as
markdown. The browser loads nothing: `loadResource` answers every URL with nothing and links go
through a confirmation before the system browser sees them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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

from app.ui.lossless_view import DIVERGENCE, verdict_line
from app.ui.render import P_MESSAGE, P_PROV, P_REJECTED, P_ROUND, P_TOKEN, Links, Options, Painter
from app.ui.theme import Theme, current_theme
from app.ui.tokens import Answer

SAFE_SCHEMES = ("http", "https", "mailto")


@dataclass
class ViewMessage:
    key: int
    role: str  # user or assistant
    answer: Answer  # user text is an Answer of one plain token
    state: str = "complete"
    stats: dict[str, Any] = field(default_factory=dict)
    live: bool = False
    checking: bool = False  # a losslessness check of this answer is running


def stats_line(stats: dict[str, Any]) -> str:
    if not stats:
        return ""
    parts = [f"{stats.get('tokens', 0)} tokens"]
    if stats.get("tok_s"):
        parts.append(f"{stats['tok_s']:.1f} tok/s")
    if stats.get("ttft_s") is not None:
        parts.append(f"first token {stats['ttft_s'] * 1000:.0f} ms")
    if stats.get("proposed"):
        parts.append(f"acceptance {stats.get('acceptance', 0):.0%}")
        parts.append(f"{stats.get('mean_accepted', 0):.2f} accepted/round")
    if stats.get("speedup"):
        parts.append(f"{stats['speedup']:.2f}× vs plain")
    return " · ".join(parts)


class ChatView(QTextBrowser):
    action = Signal(str, int)  # "edit" | "regenerate" | "copymsg" | "check" | "cancelcheck", message key

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setSearchPaths([])
        self.setMouseTracking(True)
        self.document().setDocumentMargin(14)
        self.anchorClicked.connect(self._on_anchor)
        self.theme: Theme = current_theme()
        self.options = Options()
        self.messages: list[ViewMessage] = []
        self.links = Links()
        self.resource_requests: list[str] = []  # what output asked to load (never loaded)
        self.confirm_link = self._confirm  # replaced in tests
        self._live_start = self._live_header = 0
        self._painted = 0
        self._rejected_seen = 0
        self._keys = 0

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
    def new_key(self) -> int:
        self._keys += 1
        return self._keys

    def set_messages(self, messages: list[ViewMessage]) -> None:
        self.messages = messages
        self.rebuild()

    def set_options(self, options: Options) -> None:
        self.options = options
        self.rebuild()

    def set_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.rebuild()

    def rebuild(self) -> None:
        """Whole transcript: on load, option or theme changes, edits; never per token."""
        self.document().clear()
        self.links = Links()
        edit = QTextCursor(self.document())
        edit.beginEditBlock()  # one layout pass for the whole transcript
        for m in self.messages:
            self._insert(m)
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
        span: tuple[int, int] | None = None
        block = self.document().begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                fmt = frag.charFormat()
                if (
                    fmt.property(P_MESSAGE) == key
                    and fmt.property(P_TOKEN) == index
                    and not fmt.property(P_REJECTED)
                ):
                    end = frag.position() + frag.length()
                    span = (frag.position(), end) if span is None else (span[0], end)
                it += 1
            block = block.next()
        return span

    def _mark_divergences(self) -> None:
        """Underline each answer's first divergence from plain decoding (an overlay, not the text)."""
        marks = []
        for m in self.messages:
            check = m.stats.get("lossless") if m.role == "assistant" else None
            position = check.get("position") if isinstance(check, dict) else None
            span = self.token_range(m.key, position) if isinstance(position, int) else None
            if span is None:
                continue
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

    def _header(self, cursor: QTextCursor, m: ViewMessage) -> None:
        block = QTextBlockFormat()
        block.setTopMargin(12)
        block.setBottomMargin(2)
        if not cursor.atStart():
            cursor.insertBlock(block)
        else:
            cursor.setBlockFormat(block)
        fmt = self._base()
        fmt.setFontWeight(QFont.Weight.Bold)
        fmt.setProperty(P_MESSAGE, m.key)
        cursor.insertText("You" if m.role == "user" else "Assistant", fmt)
        note = (
            ""
            if m.live
            else {"partial": "  · interrupted", "cancelled": "  · stopped", "error": "  · failed"}.get(
                m.state, ""
            )
        )
        if note:
            muted = self._base()
            muted.setForeground(QBrush(self.theme.muted))
            cursor.insertText(note, muted)
        cursor.insertBlock(QTextBlockFormat())

    def _actions(self, cursor: QTextCursor, m: ViewMessage) -> None:
        names = (
            ("edit",)
            if m.role == "user"
            else ("regenerate", "copymsg", "cancelcheck" if m.checking else "check")
        )
        labels = {
            "edit": "Edit",
            "regenerate": "Regenerate",
            "copymsg": "Copy",
            "check": "Check losslessness",
            "cancelcheck": "Cancel check",
        }
        cursor.insertBlock(QTextBlockFormat())
        for name in names:
            fmt = self._base()
            fmt.setForeground(QBrush(self.theme.muted))
            fmt.setFontPointSize(max(self.font().pointSizeF() - 1, 7))
            fmt.setAnchor(True)
            fmt.setAnchorHref(f"specchat:{name}/{m.key}")
            cursor.insertText(labels[name], fmt)
            cursor.insertText("   ", self._base())
        line = verdict_line(m.stats, m.checking) if m.role == "assistant" else None
        if line is not None:
            fmt = self._base()
            fmt.setForeground(QBrush(QColor(line[1]) if line[1] else self.theme.muted))
            fmt.setFontPointSize(max(self.font().pointSizeF() - 1, 7))
            fmt.setProperty(P_MESSAGE, m.key)
            cursor.insertBlock(QTextBlockFormat())
            cursor.insertText(line[0], fmt)

    def _insert(self, m: ViewMessage) -> None:
        cursor = self._cursor()
        self._live_header = cursor.position()
        self._header(cursor, m)
        painter = Painter(cursor, self.theme, self.options, m.key)
        if m.role == "user":
            block = QTextBlockFormat()
            block.setBackground(QBrush(self.theme.user_bg))
            cursor.setBlockFormat(block)
            fmt = self._base()
            fmt.setProperty(P_MESSAGE, m.key)
            cursor.insertText(m.answer.text, fmt)
            self._actions(cursor, m)
        elif m.live:
            self._live_start = cursor.position()
            self._painted = self._rejected_seen = 0
            self.paint_live(m, len(m.answer.parts))
        else:
            painter.markdown(m.answer, self._base(), self.links)
            self._actions(cursor, m)

    def append(self, m: ViewMessage) -> None:
        self.messages.append(m)
        self._insert(m)
        self.scroll_to_end()

    # -- streaming ------------------------------------------------------------------------------
    def begin_live(self, m: ViewMessage) -> None:
        m.live = True
        self.messages.append(m)
        self._insert(m)
        self.scroll_to_end()

    def paint_live(self, m: ViewMessage, ready: int) -> None:
        """Append tokens painted..ready-1 of the live answer; cheap, called once per batch."""
        if ready <= self._painted:
            return
        at_end = self._at_end()
        rejected = {i: t for i, t in m.answer.rejected[self._rejected_seen :]}
        self._rejected_seen = len(m.answer.rejected)
        cursor = self._cursor()
        cursor.beginEditBlock()  # the batch is laid out once, not once per token
        Painter(cursor, self.theme, self.options, m.key).tokens(
            m.answer, self._painted, ready, self._base(), rejected
        )
        cursor.endEditBlock()
        self._painted = ready
        if at_end:
            self.scroll_to_end()

    def finish_live(self, m: ViewMessage) -> None:
        """Replace the live plain text with the rendered markdown, once."""
        m.live = False
        at_end = self._at_end()
        cursor = QTextCursor(self.document())
        cursor.setPosition(self._live_header)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.beginEditBlock()
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
        fmt = cursor.charFormat()
        key = fmt.property(P_MESSAGE)
        if key is None:
            return None
        info: dict[str, Any] = {"message": int(key)}
        if fmt.property(P_REJECTED):
            info["rejected"] = True
        if fmt.property(P_TOKEN) is not None:
            info.update(
                token=int(fmt.property(P_TOKEN)),
                provenance=str(fmt.property(P_PROV)),
                round=int(fmt.property(P_ROUND)),
            )
        return info

    def tooltip_for(self, info: dict[str, Any]) -> str:
        lines = []
        if info.get("rejected"):
            lines.append("Proposed by the draft, refused by the main model")
        elif "token" in info:
            who = {"main": "main model", "draft": "draft (accepted)", "lookup": "prompt lookup (accepted)"}
            lines.append(
                f"Token {info['token']} · {who.get(info['provenance'], info['provenance'])} · round {info['round']}"
            )
        message = next((m for m in self.messages if m.key == info["message"]), None)
        if message is not None and message.stats:
            lines.append(stats_line(message.stats))
        return "\n".join(lines)

    def contextMenuEvent(self, e: QContextMenuEvent) -> None:
        """The standard menu, plus the answer's own actions when the click is on an answer."""
        menu = self.createStandardContextMenu(e.pos())
        info = self.info_at(self.cursorForPosition(e.pos()).position())
        m = next((m for m in self.messages if info and m.key == info["message"]), None)
        if m is not None and m.role == "assistant" and not m.live:
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
