"""`python -m app agreement`: exact against residual acceptance per prompt and class, or a clear error."""

from __future__ import annotations

import json

import pytest

from app.cli import main


def test_agreement_reports_both_rules_per_prompt_and_class(
    toy_models, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "agree.json"
    code = main(
        [
            "agreement",
            "--main",
            str(toy_models.main),
            "--draft",
            str(toy_models.draft),
            "--classes",
            "code",
            "--max-tokens",
            "8",
            "--k",
            "1,2",
            "--json",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.split()}
    assert {"code-1", "code-2", "code", "all"} <= rows.keys()
    tokens, exact, residual, ratio = (float(x) for x in rows["all"][1:5])
    assert tokens == 16, "16 tokens compared over the two prompts"
    assert 0 < exact < residual <= 1, "agreement is a fraction, residual above exact"
    assert ratio == pytest.approx(residual / exact, rel=0.05), "the ratio column is residual over exact"
    saved = json.loads(out.read_text())
    assert [p["id"] for p in saved] == ["code-1", "code-2"], "every prompt's figures are saved, in order"
    assert len(saved[0]["residual"]) == 8, "each saved prompt has a residual figure per token position"


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--temperature", "0"], "give --temperature above 0"),
        (["--k", "0"], "draft lengths of 1 or more"),
    ],
)
def test_agreement_refuses_what_it_cannot_compute(toy_models, capsys, extra, message) -> None:
    args = ["agreement", "--main", str(toy_models.main), "--draft", str(toy_models.draft), *extra]
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_agreement_without_a_draft_says_so(toy_models, capsys) -> None:
    assert main(["agreement", "--main", str(toy_models.main)]) == 2
    assert "needs --draft" in capsys.readouterr().err
