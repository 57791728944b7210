"""What kind of prompt a user sent: code, repetitive, creative or prose.

Speculation pays very differently by kind (a draft guesses boilerplate code and copied text far
better than a poem), so the speedup history is grouped by it. The heuristic is deliberately
small and checked against the benchmark's own labelled prompts:

1. repetitive: the prompt asks to transform text it carries (reformat, copy, convert, translate,
   fix, add … to …) and carries a body (three or more lines after the request, or a fenced
   block), or its own lines repeat: the answer will copy much of the prompt.
2. code: a fenced block or code punctuation (`def f(`, `=>`, a line ending in `{` or `;`).
3. creative: a poem, story, song, joke, or something to invent or imagine.
4. code again: a programming language or code word (after creative, so "a story about a bug"
   stays creative).
5. prose: everything else (explanations, summaries, questions).
"""

from __future__ import annotations

import re

KINDS = ("code", "prose", "repetitive", "creative")

_TRANSFORM = re.compile(
    r"\b(reformat|format (?:it|this|them)? ?as|rewrite|copy|convert|translate|refactor|rename|fix|"
    r"proofread|correct|transform|turn (?:this|it|these) into|sort|add (?:a |an )?[\w\s-]{0,30}\bto (?:every|each|all))\b",
    re.IGNORECASE,
)
_CODE = re.compile(
    r"\b(python|javascript|typescript|java|rust|golang|c\+\+|c#|kotlin|swift|ruby|php|bash|shell|sql|html|css|"
    r"regex|function|method|class|script|program|compile[rsd]?|debug|bug|api|json|yaml|unit tests?|algorithm|"
    r"implement|recursion|variable|docstring|stack trace|exception|string|array|integer|loop|query|database)\b",
    re.IGNORECASE,
)
# Only spaces and tabs around line ends: `\s*` there also spans newlines, and on a paste of blank
# lines every line start would then scan to the end of the text (quadratic, on the UI thread).
# One word character before `()` finds the same calls as `\w+\(\)`, which rescans a long word
# from each of its letters (quadratic in the word).
_CODE_PUNCT = re.compile(
    r"(\bdef \w+\(|\w\(\)|=>|::|;[ \t]*$|\{[ \t]*$|^[ \t]*(import|from|#include) )", re.MULTILINE
)
_CREATIVE = re.compile(
    r"\b(poem|poetry|haiku|sonnet|limerick|verse|story|stories|tale|fable|fairy|song|lyrics|rhyme|joke|"
    r"fiction|novel|screenplay|invent|imagine|fantasy|myth)\b",
    re.IGNORECASE,
)


def _body_lines(text: str) -> int:
    """Non-empty lines after the first: the material a request carries."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return max(0, len(lines) - 1)


def _self_repetitive(text: str) -> bool:
    """Half or more of six-plus lines are duplicates of another line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return len(lines) >= 6 and len(set(lines)) <= len(lines) / 2


# The rules read the prompt's head: the request is there, its lines are a fair sample of the rest,
# and a huge paste after it would otherwise cost the UI thread, which classifies every message it
# sends, time in proportion (100,000 blank lines took 50 ms to count).
HEAD = 16_384


def classify(text: str) -> str:
    """One of KINDS for a user prompt (see the module docstring for the rules)."""
    fenced, head = "```" in text, text[:HEAD]
    if _self_repetitive(head) or (_TRANSFORM.search(head) and (fenced or _body_lines(head) >= 3)):
        return "repetitive"
    if fenced or _CODE_PUNCT.search(head):
        return "code"
    if _CREATIVE.search(head):
        return "creative"
    return "code" if _CODE.search(head) else "prose"
