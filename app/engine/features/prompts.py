"""The built-in prompts the arena and the benchmark time: two of each class a chat meets.

Classes differ in how much a draft or prompt lookup can guess (repetitive text far more than a
poem), so a ranking over one class alone would flatter some drafts.
"""

from __future__ import annotations

from dataclasses import dataclass

PROMPT_CLASSES = ("code", "prose", "repetitive", "creative")


@dataclass(frozen=True, slots=True)
class BenchPrompt:
    id: str
    prompt_class: str
    text: str


BUILTIN_PROMPTS: tuple[BenchPrompt, ...] = (
    BenchPrompt(
        "code-1",
        "code",
        "Write a Python function that checks whether a string is a palindrome, with a docstring.",
    ),
    BenchPrompt(
        "code-2",
        "code",
        "Write a JavaScript function that debounces another function, and show how to use it.",
    ),
    BenchPrompt("prose-1", "prose", "Explain in two paragraphs why the sky is blue."),
    BenchPrompt("prose-2", "prose", "Summarize the main causes of inflation for a general audience."),
    BenchPrompt(
        "repetitive-1",
        "repetitive",
        "Reformat this list as a JSON array of objects with keys name and age:\n"
        "Alice, 34\nBob, 27\nCarol, 45\nDave, 31\nErin, 29\nFrank, 52",
    ),
    BenchPrompt(
        "repetitive-2",
        "repetitive",
        "Copy this code and add a type hint to every parameter:\n"
        "def area(width, height):\n    return width * height\n\n"
        "def perimeter(width, height):\n    return 2 * (width + height)\n",
    ),
    BenchPrompt(
        "creative-1", "creative", "Write a short poem about a lighthouse keeper who befriends a storm."
    ),
    BenchPrompt(
        "creative-2", "creative", "Invent a new board game and describe its rules in a few sentences."
    ),
)
