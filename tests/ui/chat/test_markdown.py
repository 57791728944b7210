"""The markdown parser against what people write in chat: nested lists, fences (closed or not),
tables, inline code, links, emphasis and stray HTML.

The properties are the ones a reader checks: every word written shows, code shows exactly as
typed, markup never becomes HTML, links keep their address, and no input makes it slow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import app.ui.chat.text.markdown as markdown
from app.ui.chat.text.markdown import Block, code_text, parse

WORD = st.from_regex(r"[A-Za-z0-9]{1,8}", fullmatch=True)
URL = WORD.map(lambda w: f"https://example.com/{w}")
# inline code as typed between single backticks: anything on one line but a backtick
CODE = st.text(
    st.characters(blacklist_characters="`\n\r", blacklist_categories=("Cs",)), min_size=1, max_size=20
)
CODE_LINE = st.text(
    st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), max_size=30
).filter(lambda line: not line.strip().startswith(("```", "~~~")))


def words_of(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9]+", text)


@dataclass
class Doc:
    """A generated document and what a reader expects to see of it."""

    text: str = ""
    kinds: list[str] = field(default_factory=list)  # the blocks, in order
    words: list[str] = field(default_factory=list)  # every visible word outside fenced code
    code_blocks: list[str] = field(default_factory=list)
    inline_code: list[str] = field(default_factory=list)
    links: list[tuple[list[str], str]] = field(default_factory=list)  # (label words, address)
    tags: list[str] = field(default_factory=list)  # raw HTML written in prose
    levels: list[int] = field(default_factory=list)  # list items' nesting


@st.composite
def inline_run(draw: st.DrawFn, doc: Doc) -> str:
    """A line of prose: words, emphasis, inline code, links and raw tags, space-separated."""
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["word", "italic", "bold", "under", "code", "link", "tag"]))
        words = draw(st.lists(WORD, min_size=1, max_size=3))
        if kind == "code":
            content = draw(CODE)
            doc.inline_code.append(content)
            doc.words += words_of(content)
            parts.append(f"`{content}`")
            continue
        if kind == "link":
            url = draw(URL)
            doc.links.append((words, url))
            doc.words += words
            parts.append(f"[{' '.join(words)}]({url})")
            continue
        if kind == "tag":
            tag = draw(st.sampled_from(["b", "img", "script", "a", "iframe"]))
            raw = f'<{tag} src="{words[0]}">'
            doc.tags.append(raw)
            doc.words += [tag, "src", words[0]]
            parts.append(raw)
            continue
        if kind == "under":  # underscores mark emphasis only around a whole word
            words = words[:1]
        doc.words += words
        text = " ".join(words)
        parts.append({"word": text, "italic": f"*{text}*", "bold": f"**{text}**", "under": f"_{text}_"}[kind])
    return " ".join(parts)


@st.composite
def documents(draw: st.DrawFn) -> Doc:
    doc = Doc()
    blocks = []
    n = draw(st.integers(1, 6))
    for index in range(n):
        kind = draw(st.sampled_from(["p", "h", "quote", "list", "fence", "table"]))
        if kind == "p":
            blocks.append(draw(inline_run(doc)))
            doc.kinds.append("p")
        elif kind == "h":
            blocks.append("#" * draw(st.integers(1, 6)) + " " + draw(inline_run(doc)))
            doc.kinds.append("h")
        elif kind == "quote":
            blocks.append("> " + draw(inline_run(doc)))
            doc.kinds.append("quote")
        elif kind == "list":
            lines, level = [], 0
            for _ in range(draw(st.integers(1, 5))):
                level = draw(st.integers(0, level + 1))  # a child, a sibling or back out
                marker = draw(st.sampled_from(["-", "*", "+", "1.", "2)"]))
                lines.append("  " * level + marker + " " + draw(inline_run(doc)))
                doc.kinds.append("li")
                doc.levels.append(level)
            blocks.append("\n".join(lines))
        elif kind == "table":
            columns = draw(st.integers(1, 3))
            rows = [draw(st.lists(WORD, min_size=columns, max_size=columns)) for _ in range(2)]
            head, *body = ["| " + " | ".join(row) + " |" for row in rows]
            blocks.append("\n".join([head, "|" + "---|" * columns, *body]))
            doc.words += [w for row in rows for w in row]
            doc.kinds.append("p")  # shown as text with its pipes: every cell readable
        else:
            body = draw(st.lists(CODE_LINE, max_size=4))
            lang = draw(st.sampled_from(["", "python", "rust", "c++"]))
            closed = index < n - 1 or draw(st.booleans())  # only the last fence may run to the end
            blocks.append(f"```{lang}\n" + "".join(line + "\n" for line in body) + ("```" if closed else ""))
            if not closed:
                blocks[-1] = blocks[-1].removesuffix("\n")
            doc.code_blocks.append("\n".join(body))
            doc.kinds.append("code")
    doc.text = "\n\n".join(blocks)
    return doc


def visible(text: str, block: Block) -> str:
    return "".join(text[s.start : s.end] for s in block.spans)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_what_people_write_reads_back_as_written(doc: Doc) -> None:
    blocks = parse(doc.text)
    assert [b.kind for b in blocks] == doc.kinds
    prose = [b for b in blocks if b.kind != "code"]
    assert [w for b in prose for w in words_of(visible(doc.text, b))] == doc.words
    assert [code_text(doc.text, b) for b in blocks if b.kind == "code"] == doc.code_blocks
    assert [b.level for b in blocks if b.kind == "li"] == doc.levels
    spans = [(doc.text[s.start : s.end], s) for b in prose for s in b.spans]
    assert [t for t, s in spans if "code" in s.style] == doc.inline_code
    for url in {url for _, url in doc.links}:
        linked = " ".join(t for t, s in spans if s.href == url and "link" in s.style)
        assert words_of(linked) == [w for label, u in doc.links if u == url for w in label]
    shown = "".join(t for t, _ in spans)
    for raw in doc.tags:
        assert raw in shown  # a tag in prose is text to read, never markup


@settings(max_examples=300)
@given(st.text(alphabet="*_`[]()!\\<>#-+> \n~|ab1.", max_size=400))
def test_any_text_parses_to_ordered_slices_of_itself(text: str) -> None:
    """Nothing is invented: every shown character is a slice of the source, in source order."""
    end = 0
    for block in parse(text):
        for span in block.spans:
            assert end <= span.start <= span.end <= len(text)
            end = span.end


@pytest.mark.parametrize(
    "piece",
    ["*", "**", "`", "``", "_", "[", "[](", "![](", "*a", "**a", "`a", "\\*", "*_", "[a](", "<"],
)
def test_adversarial_runs_take_at_most_quadratic_work(piece: str, monkeypatch) -> None:
    """Thousands of unmatched markers (a model stuck repeating `*`) must not stall the window:
    the parser's searches, counted in characters scanned, stay within the text's length squared."""
    scanned = [0]
    find = markdown.find_between

    def counting(text: str, needle: str, start: int, end: int) -> int:
        scanned[0] += max(0, end - start)
        return find(text, needle, start, end)

    monkeypatch.setattr(markdown, "find_between", counting)
    for text in (piece * 2000, ("x " + piece) * 1000, piece * 1000 + "x" + piece[::-1] * 1000):
        scanned[0] = 0
        blocks = parse(text)
        assert scanned[0] <= len(text) ** 2
        assert "".join(visible(text, b) for b in blocks if b.kind != "code") or blocks


def _ever_shorter_ticks(total: int) -> str:
    out, k = [], 1
    while sum(map(len, out)) < total:
        out.append("`" * k + " ")
        k += 1
    return "x " + "".join(reversed(out))  # not at the line start, where three open a fence


@pytest.mark.parametrize(
    "text",
    [
        "[" * 20_000,
        "![" * 10_000,
        "[a](" * 5_000,
        "\\\\*x" * 5_000,  # each `*` looks for an unescaped close past every escaped one
        "\\\\_x " * 5_000,
        "** a" * 5_000,
        "*a " * 5_000 + "*",
        _ever_shorter_ticks(20_000),
        "`` `" * 5_000,
    ],
    ids=[
        "brackets",
        "images",
        "open-links",
        "escaped-stars",
        "escaped-unders",
        "bold",
        "stars",
        "ticks",
        "mixed-ticks",
    ],
)
def test_unmatched_markers_on_one_line_take_linear_work(text: str, monkeypatch) -> None:
    """A long line of openers that never close (a model stuck repeating them, a paste) is searched
    once, not once per opener: characters actually scanned stay within a few times its length."""
    scanned = [0]
    find = markdown.find_between

    def counting(text: str, needle: str, start: int, end: int) -> int:
        at = find(text, needle, start, end)
        scanned[0] += (at + len(needle) if at >= 0 else end) - start
        return at

    monkeypatch.setattr(markdown, "find_between", counting)
    parse(text)
    assert scanned[0] <= 4 * len(text)


@pytest.mark.timeout(20)
def test_a_heading_line_of_hashes_and_blanks_is_linear() -> None:
    """The heading's trailing `#`s are cut without backtracking: this line took minutes before."""
    text = "# a" + " #" * 200_000 + "x"
    [block] = parse(text)
    assert block.kind == "h", "a line of hashes is a heading"
    assert (block.spans[0].start, block.spans[-1].end) == (2, len(text)), (
        "the heading spans the line after '# '"
    )
    assert [(b.kind, visible(t, b)) for t in ["## Title ##  "] for b in parse(t)] == [("h", "Title")]


def test_nested_list_keeps_its_levels_and_markers() -> None:
    text = "- fruit\n  - apple\n    1. green\n  - pear\n- veg"
    items = parse(text)
    assert [(b.level, b.marker, visible(text, b)) for b in items] == [
        (0, "-", "fruit"),
        (1, "-", "apple"),
        (2, "1.", "green"),
        (1, "-", "pear"),
        (0, "-", "veg"),
    ]


def test_an_unclosed_fence_runs_to_the_end_verbatim() -> None:
    text = "Here:\n\n```python\ndef f(x):\n    return x * 2  # *not* emphasis"
    blocks = parse(text)
    assert [b.kind for b in blocks] == ["p", "code"], "an unclosed fence is a code block after the paragraph"
    assert blocks[1].lang == "python", "the code block keeps its language"
    assert code_text(text, blocks[1]) == "def f(x):\n    return x * 2  # *not* emphasis"


def test_table_cells_stay_readable() -> None:
    text = "| k | speedup |\n|---|---|\n| 4 | 1.8x |"
    [block] = parse(text)
    assert visible(text, block) == text  # no table layout, but nothing lost


def test_links_show_their_label_and_keep_the_address() -> None:
    text = "see [the *docs*](https://example.com/d) or ![](https://example.com/i.png)"
    spans = parse(text)[0].spans
    shown = [(text[s.start : s.end], s.href, sorted(s.style)) for s in spans]
    assert ("the ", "https://example.com/d", ["link"]) in shown
    assert ("docs", "https://example.com/d", ["italic", "link"]) in shown
    # an image with no label shows its address as a link: nothing is fetched
    assert ("https://example.com/i.png", "https://example.com/i.png", ["image", "link"]) in shown


def test_escaped_markers_and_html_stay_literal() -> None:
    text = r"2 \* 3 is <b>six</b>, `a **b**`"
    spans = parse(text)[0].spans
    assert "".join(text[s.start : s.end] for s in spans) == "2 * 3 is <b>six</b>, a **b**"
    assert [text[s.start : s.end] for s in spans if "code" in s.style] == ["a **b**"]


def shifted(
    blocks: list[Block], by: int
) -> list[tuple[str, tuple[tuple[int, int, frozenset[str], str | None], ...]]]:
    return [(b.kind, tuple((s.start + by, s.end + by, s.style, s.href) for s in b.spans)) for b in blocks]


MARKDOWNISH = st.text(alphabet="*_`[]()!\\<>#-+> \n~|ab1.", max_size=300)


@settings(max_examples=150)
@given(st.one_of(MARKDOWNISH, documents().map(lambda d: d.text)), st.data())
def test_a_cut_found_while_streaming_holds_for_the_whole_text(text: str, data: st.DataObject) -> None:
    """What the live view draws as final before the cut is what the whole answer parses to, and the
    rest parses alone from the cut: so streamed pieces, once finished, read as the one-shot render."""
    whole = shifted(parse(text), 0)
    prefix = text[: data.draw(st.integers(0, len(text)), label="streamed so far")]
    blocks, settled, cut = markdown.parse_open(prefix)
    assert shifted(blocks[:settled], 0) == whole[:settled]
    assert shifted(parse(text[cut:]), cut) == whole[settled:]
