"""A small markdown parser that returns source ranges instead of HTML.

Every visible character of the result is a slice of the original text, so the renderer can find
which token produced it and keep per-token highlighting through markdown. Nothing is ever
interpreted as HTML: raw tags stay text, images become links, and no URL is fetched.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)[^\n]*$")
# Only the opening: its text is the rest of the line less trailing blanks and #s, cut in Python;
# a lazy group before `[ \t#]*$` backtracks quadratically on a long line of " #".
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_ITEM = re.compile(r"^([ \t]*)([-*+]|\d{1,9}[.)])[ \t]+")
_QUOTE = re.compile(r"^ {0,3}>[ \t]?")
_TICKS = re.compile("`+")
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
    unclosed: bool = False  # a fence that runs to the end of the text


def _lines(text: str) -> list[tuple[int, str]]:
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, line))
        pos += len(line) + 1
    return out


def parse(text: str) -> list[Block]:
    return parse_open(text)[0]


def fence_closes(line: str, closing: str) -> bool:
    return line.strip().startswith(closing)


def fence_marker(line: str) -> str:
    """The backticks or tildes that open a fence on this line ("" if it opens none)."""
    fence = _FENCE.match(line)
    return fence.group(1) if fence else ""


def parse_open(text: str) -> tuple[list[Block], int, int]:
    """Blocks, and how many of them more text cannot change with the offset where the rest starts.

    That offset is a line start where nothing is pending (after a blank line, a list item, a heading
    or a closed fence) or where a fence opens: parsing from there on gives the same blocks."""
    blocks: list[Block] = []
    settled = (0, 0)
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
        if not para:
            settled = (len(blocks), start)
        fence = _FENCE.match(line)
        if fence:
            flush()
            settled = (len(blocks), start)
            closing, j = fence.group(1), i + 1
            while j < len(lines) and not fence_closes(lines[j][1], closing):
                j += 1
            body, unclosed = lines[i + 1 : j], j >= len(lines)
            if body:
                end = body[-1][0] + len(body[-1][1])
                blocks.append(
                    Block(
                        "code",
                        (Span(body[0][0], end, frozenset({"code"})),),
                        lang=fence.group(2),
                        unclosed=unclosed,
                    )
                )
            else:
                span = Span(start, start, frozenset({"code"}))
                blocks.append(Block("code", (span,), lang=fence.group(2), unclosed=unclosed))
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
            a = start + heading.end()
            title = line[heading.end() :].rstrip(" \t#")
            blocks.append(Block("h", tuple(inline(text, a, a + len(title))), len(heading.group(1))))
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
    return blocks, settled[0], settled[1]


def find_between(text: str, needle: str, start: int, end: int) -> int:
    """Every search the parser makes; public so a test can count the characters each one scans."""
    at = text.find(needle, start, end)
    return at


class _Finder:
    """Searches one range, remembering the last answer per needle. The parser asks from ever later
    positions, so a run of unmatched openers (`[[[[`, `![`, escaped `*`) reuses one search instead
    of scanning to the end once per opener, which made a long line quadratic."""

    def __init__(self, text: str, begin: int, end: int) -> None:
        self.text, self.begin, self.end = text, begin, end
        self.last: dict[tuple[str, bool], tuple[int, int]] = {}
        self.runs: list[tuple[int, int]] | None = None  # backtick runs (start, end), for `ticks`
        self.longest: list[int] = []  # the longest run from each run on

    def ticks(self, count: int, start: int) -> int:
        """First `count` backticks at or after `start`. Openers of ever shorter runs would each
        search to the end in vain; the longest run still ahead answers those at once."""
        if self.runs is None:
            self.runs = [m.span() for m in _TICKS.finditer(self.text, self.begin, self.end)]
            self.longest = [0] * (len(self.runs) + 1)
            for j in range(len(self.runs) - 1, -1, -1):
                a, b = self.runs[j]
                self.longest[j] = max(b - a, self.longest[j + 1])
        j = bisect.bisect_right(self.runs, start, key=lambda run: run[1])  # the first ending after
        if j == len(self.runs):
            return -1
        a, b = self.runs[j]
        if max(b - max(a, start), self.longest[j + 1]) < count:
            return -1
        return self.find("`" * count, start)

    def find(self, needle: str, start: int, unescaped: bool = False) -> int:
        """First `needle` at or after `start`; with `unescaped`, the first not after a backslash."""
        key = (needle, unescaped)
        if key in self.last:
            since, at = self.last[key]
            if since <= start and (at < 0 or start <= at):  # nothing in [since, at) matched
                return at
        at = find_between(self.text, needle, start, self.end)
        while unescaped and at > 0 and self.text[at - 1] == "\\":
            at = find_between(self.text, needle, at + 1, self.end)
        self.last[key] = (start, at)
        return at


def inline(
    text: str, a: int, b: int, style: frozenset[str] = frozenset(), href: str | None = None
) -> list[Span]:
    """Spans of text[a:b] with emphasis, code and links resolved; markers are dropped."""
    spans: list[Span] = []
    plain, i = a, a
    finder = _Finder(text, a, b)

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
            close = finder.ticks(n - i, n)
            if close > n:
                emit(plain, i)
                spans.append(Span(n, close, style | {"code"}, href))
                plain = i = close + len(ticks)
                continue
            i = n
            continue
        if text.startswith(("**", "__"), i):
            mark = text[i : i + 2]
            close = finder.find(mark, i + 2)
            if close > i + 2 and not text[i + 2].isspace():
                emit(plain, i)
                spans += inline(text, i + 2, close, style | {"bold"}, href)
                plain = i = close + 2
                continue
        if c in "*_" and i + 1 < b and not text[i + 1].isspace() and text[i + 1] != c:
            if c == "*" or i == a or not text[i - 1].isalnum():
                close = finder.find(c, i + 2, unescaped=True)
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
            close = finder.find("](", label)
            end = finder.find(")", close + 2) if close >= 0 else -1
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
