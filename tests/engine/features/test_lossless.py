"""The losslessness check on the toy pair: speculative greedy answers replay identically."""

from __future__ import annotations

import threading

import mlx.core as mx

from app.engine.decoding.decode import generate
from app.engine.decoding.events import GenerationFinished
from app.engine.decoding.policy import FixedDraftLength
from app.engine.decoding.session import ChatSession
from app.engine.features.lossless import check_lossless
from tests.engine.helpers import next_token_logits


def speculative_answer(pair, prompt, n=20) -> list[int]:
    for event in generate(ChatSession(pair), prompt, policy=FixedDraftLength(3), max_tokens=n):
        if isinstance(event, GenerationFinished):
            return list(event.token_ids)
    raise AssertionError("no GenerationFinished")


def test_speculative_greedy_answer_is_identical(toy_pair, toy_prompt):
    answer = speculative_answer(toy_pair, toy_prompt)
    report = check_lossless(toy_pair, toy_prompt, answer)
    assert report.verdict == "identical", "a speculative greedy answer replays identically"
    assert report.compared == len(answer), "every token is compared"
    assert "Identical" in report.message


def test_tampered_answer_reports_first_divergence_at_a_wide_margin(toy_pair, toy_prompt):
    answer = speculative_answer(toy_pair, toy_prompt)
    logits = next_token_logits(toy_pair, toy_prompt + answer[:5])
    worst = int(mx.argmin(logits).item())
    tampered = answer[:5] + [worst] + answer[6:]
    report = check_lossless(toy_pair, toy_prompt, tampered)
    assert report.position == 5 and report.compared == 5
    assert report.answer_token == worst and report.plain_token == answer[5]
    assert report.verdict == "wide-margin", "a wide margin is called that"
    assert "bug" in report.message, "a wide margin is called a bug"
    assert report.top2_margin is not None and report.top2_margin >= 0
    assert report.answer_gap > report.top2_margin


def test_second_choice_with_a_generous_threshold_is_a_near_tie(toy_pair, toy_prompt):
    answer = speculative_answer(toy_pair, toy_prompt)
    logits = next_token_logits(toy_pair, toy_prompt + answer[:3])
    second = int(mx.argsort(-logits)[1].item())
    report = check_lossless(toy_pair, toy_prompt, answer[:3] + [second], near_tie=1e9)
    assert report.position == 3, "the divergence is found where it was made"
    assert report.verdict == "near-tie", "the second choice is a near-tie"
    assert abs(report.answer_gap - report.top2_margin) < 1e-4


def test_cancel(toy_pair, toy_prompt):
    cancel = threading.Event()
    cancel.set()
    assert check_lossless(toy_pair, toy_prompt, [1, 2, 3], cancel=cancel).verdict == "cancelled"
