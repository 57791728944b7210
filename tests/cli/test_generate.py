"""`python -m app generate` as a user would run it."""

from __future__ import annotations

import subprocess
import sys


def _generate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app", "generate", *args], capture_output=True, text=True, timeout=300
    )


def test_generate_streams_an_answer_and_reports_stats(toy_models):
    result = _generate(
        "--main",
        str(toy_models.main),
        "--draft",
        str(toy_models.draft),
        "--k",
        "3",
        "--max-tokens",
        "16",
        "--color",
        "always",
        "Hello",
    )
    assert result.returncode == 0, result.stderr
    assert "tok/s" in result.stderr and "acceptance" in result.stderr
    assert "\x1b[32m" in result.stdout  # some drafted tokens were accepted and coloured


def test_generate_explains_a_missing_model():
    result = _generate("--main", "/no/such/folder", "Hello")
    assert result.returncode == 2, "a model that is neither folder nor repo id is a usage error (exit 2)"
    assert "neither an existing folder nor a hub repo id" in result.stderr, (
        "the error says what the name is not"
    )
