"""`python -m app compat` as a user would run it: the verdict, its reasons and the exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _compat(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", "compat", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SPECCHAT_HOME": str(home), "HF_HOME": str(home / "hf")},
    )


def test_a_matching_pair_is_compatible(toy_models, tmp_path):
    result = _compat(tmp_path, str(toy_models.main), str(toy_models.draft))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"main:  {toy_models.main}",
        f"draft: {toy_models.draft}",
        "verdict: compatible",
    ]


def test_a_draft_whose_ids_mean_other_text_is_refused_with_its_reason(
    toy_models, toy_mismatched_draft, tmp_path
):
    result = _compat(tmp_path, str(toy_models.main), str(toy_mismatched_draft))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[2] == "verdict: incompatible"
    assert lines[3].startswith("  [refuse] token_text: token 300 differs:")


def test_json_carries_every_reason(toy_models, toy_mismatched_draft, tmp_path):
    result = _compat(tmp_path, str(toy_models.main), str(toy_mismatched_draft), "--json")
    assert result.returncode == 1
    verdict = json.loads(result.stdout)
    assert verdict["compatible"] is False
    assert verdict["main"] == str(toy_models.main)
    assert [r["code"] for r in verdict["reasons"]] == ["token_text"]


def test_a_model_that_is_not_there_is_an_error(toy_models, tmp_path):
    missing = _compat(tmp_path, str(toy_models.main), "nobody/no-such-model")
    assert missing.returncode == 2
    assert missing.stdout == "", "nothing printed as a result for a missing model"
    assert "nobody/no-such-model is not downloaded" in missing.stderr, (
        "the error says the model is not downloaded"
    )
    not_a_name = _compat(tmp_path, str(toy_models.main), str(tmp_path / "nowhere"))
    assert not_a_name.returncode == 2, "a bad repo id is a usage error (exit 2)"
    assert "is not a valid hub repo id" in not_a_name.stderr, (
        "the error says the name is not a valid hub repo id"
    )
