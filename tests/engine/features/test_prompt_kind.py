"""The prompt-kind heuristic agrees with the benchmark's labelled prompts and with plain cases."""

from __future__ import annotations

import pytest

from app.engine.features import prompt_kind
from app.engine.features.prompt_kind import KINDS, classify
from app.engine.features.prompts import BUILTIN_PROMPTS


@pytest.mark.parametrize("prompt", BUILTIN_PROMPTS, ids=lambda p: p.id)
def test_benchmark_prompts_get_their_labelled_kind(prompt):
    assert classify(prompt.text) == prompt.prompt_class


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Tell a long story", "creative"),
        ("Write a haiku about rain", "creative"),
        ("Write a story about a bug in a spaceship", "creative"),  # a creative word outranks a code word
        ("How does speculative decoding work?", "prose"),
        ("Find the first non-repeating character in a string", "code"),
        ("const add = (a, b) => a + b", "code"),
        ("What does this print?\n```python\nprint(1)\n```", "code"),  # code, but nothing to transform
        (
            "Fix the indentation:\n```python\nif x:\nprint(1)\n```",
            "repetitive",
        ),  # the answer copies the block
        ("Translate to French:\nGood morning.\nHow are you?\nSee you tomorrow.", "repetitive"),
        ("Translate 'good morning' to French", "prose"),  # nothing carried to copy
        ("row\nrow\nrow\nrow\nrow\nrow\nyour boat", "repetitive"),
    ],
)
def test_kinds_of_everyday_prompts(text, kind):
    assert classify(text) == kind


def test_every_answer_is_a_known_kind():
    assert {classify(t) for t in ("", " ", "?", "🙂", "x" * 10_000)} <= set(KINDS)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "paste",
    [
        "hi" + "\n" * 1_000_000 + "x",  # blank lines: a line-start pattern used to rescan to the end
        "word  \n \t\n" * 100_000,
        "  ;" * 300_000,
        "add " + "a " * 500_000,
        "{" + " " * 1_000_000,
    ],
)
def test_a_megabyte_paste_is_classified_in_linear_time(paste: str) -> None:
    # Quadratic scanning of a 1 MB paste takes hours; linear takes well under a second, so the
    # timeout separates them by orders of magnitude on any machine.
    assert classify(paste) in KINDS


@pytest.mark.timeout(30)
@pytest.mark.parametrize("word", ["x" * 300_000, "_" * 300_000, "x" * 300_000 + "()"])
def test_code_punctuation_is_linear_in_a_long_word(word: str, monkeypatch) -> None:
    """A paste with no spaces (base64, minified code): the call pattern used to retry the word from
    each letter, minutes at this size, and half a second on every send within the prompt's head."""
    monkeypatch.setattr(prompt_kind, "HEAD", len(word))  # read all of it, past the usual head
    assert (classify(word) == "code") == word.endswith("()"), "only the word that ends in a call is code"
