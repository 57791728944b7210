"""Text too long to lay out whole: how much SpecChat keeps, and how much of it a view shows.

Qt lays a document out on the window's own thread, in time that grows with its characters and
faster still with its lines: a 10 MB line in the message box held the window for seconds on every
conversation switch, and 100,000 blank lines for over a second. So a view lays out only the start
of a long text (a preview), while the whole text is kept, saved and sent; and text past
`MAX_CHARS` is cut there, with a notice, so that everything done to the whole text on the window's
thread (reading a paste, saving a draft, sending) stays a few milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QMimeData

MAX_CHARS = 1_000_000
"""The most characters a message or draft keeps. The longest-reading models SpecChat runs take
about 128,000 tokens, roughly 500,000 characters of English; twice that leaves room for text that
tokenizes densely, and anything longer could not be answered anyway. A million characters save
and send in milliseconds."""
MAX_WORDS = f"{MAX_CHARS:,} characters"

EDITABLE_CHARS, EDITABLE_LINES = 20_000, 1_000  # the message box edits text up to this size
BOX_PREVIEW_CHARS, BOX_PREVIEW_LINES = 2_000, 40  # what it shows of longer text (it is 3 lines tall)
SHOWN_CHARS, SHOWN_LINES = 5_000, 100  # what the transcript shows of a longer message


def preview(text: str, chars: int = SHOWN_CHARS, lines: int = SHOWN_LINES) -> str:
    """The start of `text`: at most `chars` characters and `lines` lines; reads only that start."""
    head = text[:chars]
    end = -1
    for _ in range(lines):
        end = head.find("\n", end + 1)
        if end < 0:
            return head
    return head[:end]


def is_long(text: str) -> bool:
    """Whether the message box shows `text` as a preview instead of editing it."""
    return len(text) > EDITABLE_CHARS or text.count("\n") >= EDITABLE_LINES


@dataclass(frozen=True, slots=True)
class Kept:
    """Text as SpecChat keeps it: `cut` when the source held more than MAX_CHARS."""

    text: str
    cut: bool = False


def keep(text: str) -> Kept:
    return Kept(text[:MAX_CHARS], True) if len(text) > MAX_CHARS else Kept(text)


def pasted_text(source: QMimeData) -> Kept:
    """A paste's text, reading at most MAX_CHARS of it: a 100 MB clipboard costs no more than a
    1 MB one (a UTF-8 character is at most 4 bytes, so that many bytes hold MAX_CHARS + 1)."""
    raw = source.data("text/plain")
    if raw.isEmpty():  # text offered another way (links): short
        return keep(source.text())
    head = raw.left(4 * (MAX_CHARS + 1)).data()
    return keep(bytes(head).decode("utf-8", "replace"))


def long_notice(kept: Kept) -> str:
    """What the bar over the message box says about a text it shows only the start of."""
    size = f"{len(kept.text):,} characters"
    if kept.cut:
        return (
            f"Only the first {MAX_WORDS} of this text are kept: no model here reads more than that. "
            "The rest was left out. The box shows its start; Esc or Remove takes it out."
        )
    return (
        f"A long text ({size}): the box shows its start, and all of it is sent. Esc or Remove takes it out."
    )
