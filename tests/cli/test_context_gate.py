"""The command-line tools refuse a prompt longer than the main model reads, in one line."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.engine.helpers import copy_with_context

LONG = "a long message that goes on " * 8


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=300)


def test_generate_refuses_a_prompt_past_the_main_context(toy_models, tmp_path):
    main = copy_with_context(toy_models.main, tmp_path / "main", 32)
    result = _run("generate", "--main", str(main), "--draft", str(toy_models.draft), LONG)
    assert result.returncode == 2, "a prompt past the context is a usage error (exit 2)"
    assert result.stdout == "", "no answer is printed"
    [line] = result.stderr.splitlines()
    assert line.startswith("error: This conversation is ")
    assert line.endswith("tokens; the main model reads at most 32. Shorten the prompt.")


def test_bench_refuses_a_prompt_past_the_main_context(toy_models, tmp_path):
    main = copy_with_context(toy_models.main, tmp_path / "main", 32)
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps([{"id": "long", "prompt": LONG}]), encoding="utf-8")
    result = _run("bench", "--main", str(main), "--prompts", str(prompts), "--modes", "plain")
    assert result.returncode == 2, result.stderr
    assert "the main model reads at most 32. Shorten prompt long." in result.stderr
    assert "Traceback" not in result.stderr
