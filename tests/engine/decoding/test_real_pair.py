"""The real Qwen2.5-Coder 1.5B/0.5B pair: speculation changes speed, not the answer.

Verify passes over several tokens can round differently from one-token steps, so a
divergence is tolerated only where the main model itself is nearly tied between its top two
tokens; each prompt's outcome is printed for the record (`pytest -s`).
"""

from __future__ import annotations

import mlx.core as mx
import pytest

from app.engine.decoding.loading import load_pair
from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.decoding.session import ChatSession
from app.engine.decoding.templates.chat import format_chat
from tests.engine.gguf.conftest import imported
from tests.engine.helpers import drive

PROMPTS = (
    "Write a Python function that returns the n-th Fibonacci number.",
    "Explain what a hash map is in two sentences.",
    "Convert this to JSON: name Alice, age 34, city Paris.",
)
NEAR_TIE = 0.5  # logits
MAX_TOKENS = 16


def _top2_margin(pair, prefix: list[int]) -> float:
    logits = pair.main.model(mx.array(prefix)[None])[0, -1].astype(mx.float32)
    top = mx.sort(logits)[-2:].tolist()
    return top[1] - top[0]


@pytest.mark.real_models
@pytest.mark.heavy
@pytest.mark.timeout(3600)
def test_real_pair_greedy_speculation_matches_plain_or_diverges_only_at_near_ties():
    # bfloat16: the CPU build's quantized kernels are far slower than its dense ones
    pair = load_pair(imported("qwen1.5b", 16), imported("qwen0.5b", 16))
    accepted = proposed = 0
    for text in PROMPTS:
        prompt = format_chat(pair.tokenizer, [{"role": "user", "content": text}])
        plain = drive(ChatSession(pair), prompt, PlainDecoding(), max_tokens=MAX_TOKENS)
        spec = drive(ChatSession(pair), prompt, FixedDraftLength(4), max_tokens=MAX_TOKENS)
        assert spec.offsets_ok
        accepted += spec.finished.stats.accepted
        proposed += spec.finished.stats.proposed
        if spec.ids == plain.ids:
            print(f"identical ({len(plain.ids)} tokens): {text!r}")
            continue
        at = next(i for i, (a, b) in enumerate(zip(plain.ids, spec.ids)) if a != b)
        margin = _top2_margin(pair, prompt + plain.ids[:at])
        print(f"diverged at token {at} with top-2 margin {margin:.3f}: {text!r}")
        assert margin < NEAR_TIE, f"divergence at token {at} with a wide margin ({margin:.2f}) is a bug"
    print(f"acceptance {accepted}/{proposed}")
    assert accepted / proposed > 0.3, "the 0.5B draft should agree with the 1.5B main often"


@pytest.mark.real_models
def test_streaming_detokenizer_round_trips_on_the_real_qwen_tokenizer():
    from mlx_lm.utils import load_tokenizer

    from app.engine.decoding.text.detokenize import StreamingDetokenizer

    tokenizer = load_tokenizer(imported("qwen0.5b", 16))  # the copy fetch-models made
    text = (
        "日本語のテキストです。絵文字: 👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽\n"
        "def f(x: int) -> dict:\n    return {\"key\": [1, 2.5, null], 'ü': x}\n"
        '{"name": "Zoë", "tags": ["a", "b"], "nested": {"ok": true}}\n\t  trailing   spaces  '
    )
    ids = tokenizer.encode(text, add_special_tokens=False)
    detok = StreamingDetokenizer(tokenizer)
    segments = [detok.add(i) for i in ids]
    segments.append(detok.finish())
    assert all("\ufffd" not in s for s in segments)
    assert "".join(segments) == tokenizer.decode(ids) == text
    assert sum(1 for s in segments[:-1] if s == "") > 0, "some emoji bytes should span several tokens"
