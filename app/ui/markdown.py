"""A small markdown parser that returns source ranges instead of HTML.

Every visible character of the result is a slice of the original text, so the renderer can find
which token produced it and keep per-token highlighting through markdown. Nothing is ever
interpreted as HTML: raw tags stay text, images become links, and no URL is fetched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)[^\n]*$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_ITEM = re.compile(r"^([ \t]*)([-*+]|\d{1,9}[.)])[ \t]+")
_QUOTE = re.compile(r"^ {0,3}>[ \t]?")
_PUNCT = set("\\`*_{}[]()#+-.!<>|~\"'")


@dataclass(frozen=True, slots=True)
class Span:
    start: int  # offsets into the source text
    end: int
    style: frozenset[str] = frozenset()  # bold, italic, code, link, image
    href: str | None = None


@dataclass(frozen=True, slots=True)
class Block:
    kind: str  # p, h, li, quote, code, hr
    spans: tuple[Span, ...] = ()
    level: int = 0  # heading level, or list nesting depth
    marker: str = ""  # list bullet or number, as written
    lang: str = ""  # code fence language


def _lines(text: str) -> list[tuple[int, str]]:
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, line))
        pos += len(line) + 1
    return out


def parse(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = _lines(text)
    para: list[tuple[int, str]] = []
    kind, level, marker = "p", 0, ""

    def flush() -> None:
        nonlocal para
        if para:
            spans: list[Span] = []
            for n, (start, line) in enumerate(para):
                if n:
                    spans.append(Span(start - 1, start))  # the line break itself
                spans += inline(text, start, start + len(line))
            blocks.append(Block(kind, tuple(spans), level, marker))
        para = []

    i = 0
    while i < len(lines):
        start, line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            closing, j = fence.group(1), i + 1
            while j < len(lines) and not lines[j][1].strip().startswith(closing):
                j += 1
            body = lines[i + 1 : j]
            if body:
                end = body[-1][0] + len(body[-1][1])
                blocks.append(
                    Block("code", (Span(body[0][0], end, frozenset({"code"})),), lang=fence.group(2))
                )
            else:
                blocks.append(Block("code", (Span(start, start, frozenset({"code"})),), lang=fence.group(2)))
            i = j + 1
            continue
        heading, item, quote = _HEADING.match(line), _ITEM.match(line), _QUOTE.match(line)
        if not line.strip():
            flush()
        elif _RULE.match(line):
            flush()
            blocks.append(Block("hr"))
        elif heading:
            flush()
            a = start + heading.start(2)
            blocks.append(
                Block("h", tuple(inline(text, a, a + len(heading.group(2)))), len(heading.group(1)))
            )
        elif item:
            flush()
            kind, level, marker = "li", len(item.group(1).expandtabs(4)) // 2, item.group(2)
            para = [(start + item.end(), line[item.end() :])]
            flush()
            kind, level, marker = "p", 0, ""
        elif quote:
            if kind != "quote":
                flush()
            kind = "quote"
            para.append((start + quote.end(), line[quote.end() :]))
        else:
            if kind == "quote":
                flush()
                kind = "p"
            para.append((start, line))
        i += 1
    flush()
    return blocks


def _find(text: str, needle: str, start: int, end: int) -> int:
    at = text.find(needle, start, end)
    return at


def inline(
    text: str, a: int, b: int, style: frozenset[str] = frozenset(), href: str | None = None
) -> list[Span]:
    """Spans of text[a:b] with emphasis, code and links resolved; markers are dropped."""
    spans: list[Span] = []
    plain, i = a, a

    def emit(s: int, e: int) -> None:
        if e > s:
            spans.append(Span(s, e, style, href))

    while i < b:
        c = text[i]
        if c == "\\" and i + 1 < b and text[i + 1] in _PUNCT:
            emit(plain, i)
            plain, i = i + 1, i + 2
            continue
        if c == "`":
            n = i
            while n < b and text[n] == "`":
                n += 1
            ticks = text[i:n]
            close = _find(text, ticks, n, b)
            if close > n:
                emit(plain, i)
                spans.append(Span(n, close, style | {"code"}, href))
                plain = i = close + len(ticks)
                continue
            i = n
            continue
        if text.startswith(("**", "__"), i):
            mark = text[i : i + 2]
            close = _find(text, mark, i + 2, b)
            if close > i + 2 and not text[i + 2].isspace():
                emit(plain, i)
                spans += inline(text, i + 2, close, style | {"bold"}, href)
                plain = i = close + 2
                continue
        if c in "*_" and i + 1 < b and not text[i + 1].isspace() and text[i + 1] != c:
            if c == "*" or i == a or not text[i - 1].isalnum():
                close = i + 1
                while True:
                    close = _find(text, c, close + 1, b)
                    if close < 0 or text[close - 1] != "\\":
                        break
                if (
                    close > i + 1
                    and not text[close - 1].isspace()
                    and (close + 1 >= b or text[close + 1] != c)
                ):
                    emit(plain, i)
                    spans += inline(text, i + 1, close, style | {"italic"}, href)
                    plain = i = close + 1
                    continue
        if c == "[" or (c == "!" and i + 1 < b and text[i + 1] == "["):
            label = i + (2 if c == "!" else 1)
            close = _find(text, "](", label, b)
            end = _find(text, ")", close + 2, b) if close >= 0 else -1
            if close >= 0 and end > 0 and "\n" not in text[close:end]:
                url = text[close + 2 : end].strip().split(" ")[0].strip("<>")
                emit(plain, i)
                kind = {"link", "image"} if c == "!" else {"link"}
                if close > label:
                    spans += inline(text, label, close, style | kind, url)
                else:  # an empty label still shows something clickable: the address itself
                    spans.append(Span(close + 2, end, style | kind, url))
                plain = i = end + 1
                continue
        i += 1
    emit(plain, b)
    return spans


def code_text(text: str, block: Block) -> str:
    span = block.spans[0]
    return text[span.start : span.end]
