"""An answer's figures: each term by its one definition, and the one way a speed is written."""

from __future__ import annotations

import pytest

from app.engine.features.figures import answer_figures, speed_text, stream_rate


def test_acceptance_draft_share_and_per_round_are_different_questions():
    # 20 rounds guessed 100 tokens, 80 kept (10 of them copied from the prompt); 4 plain rounds;
    # the answer has 80 kept guesses plus one main token per round: 104 tokens
    f = answer_figures(
        tokens=104,
        tok_s=50.0,
        plain_tok_s=25.0,
        proposed=100,
        accepted=80,
        drafting_rounds=20,
        from_prompt=10,
    )
    assert f.acceptance == pytest.approx(0.80)  # of the guesses
    assert f.draft_share == pytest.approx(70 / 104) and f.prompt_share == pytest.approx(
        10 / 104
    )  # of the answer
    assert f.accepted_per_round == pytest.approx(4.0)  # per guessing round, not per round
    assert f.speedup == pytest.approx(2.0)


def test_a_speedup_needs_a_draft_that_ran_and_a_plain_speed():
    kw = dict(tokens=50, tok_s=40.0, proposed=30, accepted=20, drafting_rounds=10)
    assert answer_figures(plain_tok_s=None, **kw).speedup is None
    assert answer_figures(plain_tok_s=20.0, drafted=False, **kw).speedup is None
    assert answer_figures(plain_tok_s=20.0, **{**kw, "proposed": 0, "accepted": 0}).speedup is None
    plain_only = answer_figures(
        plain_tok_s=20.0, **{**kw, "proposed": 0, "accepted": 0, "drafting_rounds": 0}
    )
    assert plain_only.acceptance is None, "a plain-only answer has no acceptance"
    assert plain_only.accepted_per_round is None, "no accepted tokens per round"
    assert plain_only.draft_share is None, "no draft share"
    # a stored answer from before drafting rounds were counted: no per-round figure rather than a wrong one
    assert answer_figures(plain_tok_s=20.0, **{**kw, "drafting_rounds": None}).accepted_per_round is None


@pytest.mark.parametrize(
    ("tok_s", "text"),
    [
        (0.7, "0.7 tok/s"),
        (0.04, "0.04 tok/s"),
        (5.25, "5.2 tok/s"),
        (40.0, "40.0 tok/s"),
        (99.96, "100 tok/s"),
        (112.4, "112 tok/s"),
        (0.0, "— tok/s"),
        (None, "— tok/s"),
    ],
)
def test_every_speed_is_written_one_way_and_never_as_zero(tok_s, text):
    assert speed_text(tok_s) == text


def test_the_rate_runs_from_the_first_token_to_the_last():
    assert stream_rate(11, 2.0, 4.0) == pytest.approx(5.0)
    assert stream_rate(1, 2.0, 2.0) == 0.0 and stream_rate(3, None, 1.0) == 0.0
