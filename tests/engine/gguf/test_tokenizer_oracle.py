"""Our GGUF tokenizer against transformers' own GGUF tokenizer (PyTorch, test-only)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from app.engine.gguf.header import read_header
from app.engine.gguf.tokenizer import build_tokenizer, special_tokens, tokenizer_config
from tests.engine.gguf.conftest import MODEL_KEYS, need_gguf, need_torch

CORPUS = [
    "Hello world! How are you doing today? I'm fine, we've been there, they'll come.",
    "  leading spaces, trailing spaces   ",
    "tabs\tand\t\tnewlines\n\n\nand   runs      of        spaces\r\nwindows line",
    "The year 2024 had 366 days; π ≈ 3.14159265358979 and 1,000,000 > 999999.",
    "人工智能正在改变世界。我们今天学习中文分词，好吗？",
    "日本語のテキストです。カタカナとひらがな、漢字が混ざっています。東京タワー",
    "한국어 문장도 있습니다. Ünïcödé àccents: naïve café, Straße, ﬁ ligature, Ａｂｃ",
    "Emoji: 👍 👨‍👩‍👧‍👦 🏳️‍🌈 🤷🏽‍♀️ ❤️‍🔥 🇯🇵 1️⃣ done",
    'def fib(n: int) -> int:\n    """Return n."""\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
    "for (let i = 0; i < 10; i++) {\n\tconsole.log(`value: ${i}`);\n}\n// comment /* block */",
    '{"name": "SpecChat", "version": [1, 2, 3], "nested": {"ok": true, "none": null, "x": -1.5e-3}}',
    "<|im_start|>user\nSpecial tokens inside text<|im_end|>\n<|endoftext|><start_of_turn>model\n<eos>",
    "URLs https://example.com/path?q=1&r=2#frag and emails a.b@c.io, paths C:\\Users\\x",
    "Mixed: English中文日本語 emoji🙂text\u00a0nbsp\u200bzero-width\u3000ideographic space",
    "",
    " ",
    "\n",
    "a" * 300 + " " + "ab" * 100,
]

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Write hello world in Python."},
    {"role": "assistant", "content": "print('hello world')"},
    {"role": "user", "content": "Now in C 😀"},
]

pytestmark = [pytest.mark.real_models, pytest.mark.slow, pytest.mark.torch_oracle]


@functools.cache
def _oracle(key: str) -> Any:
    from transformers import AutoTokenizer

    path = need_gguf(key)
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


@pytest.mark.parametrize("key", MODEL_KEYS)
def test_ids_match_transformers(key: str) -> None:
    need_torch()
    header = read_header(need_gguf(key))
    ours = build_tokenizer(header)
    oracle = _oracle(key)
    mismatches = []
    for text in CORPUS:
        mine = ours.encode(text).ids
        theirs = oracle(text)["input_ids"]
        if mine != theirs:
            mismatches.append((text[:40], mine[:20], theirs[:20]))
        assert ours.decode(mine, skip_special_tokens=False) == oracle.decode(theirs)
    assert not mismatches, mismatches
    assert ours.get_vocab_size() == oracle.backend_tokenizer.get_vocab_size()


@pytest.mark.parametrize("key", MODEL_KEYS)
def test_chat_template_matches_transformers(key: str) -> None:
    need_torch()
    from app.engine.decoding.templates.chat import render_chat

    header = read_header(need_gguf(key))
    config = tokenizer_config(header)
    oracle = _oracle(key)
    if "chat_template" not in config:
        assert oracle.chat_template is None
        pytest.skip(f"{key} has no chat template in its GGUF")
    for generation_prompt in (True, False):
        theirs = oracle.apply_chat_template(MESSAGES, add_generation_prompt=generation_prompt, tokenize=False)
        mine = render_chat(
            config["chat_template"],
            MESSAGES,
            add_generation_prompt=generation_prompt,
            special=special_tokens(header),
        )
        assert mine == theirs
        assert build_tokenizer(header).encode(mine).ids == oracle(theirs)["input_ids"]
