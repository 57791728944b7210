"""Streaming detokenization: exact round trip, no U+FFFD for split characters."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.decoding.text.detokenize import StreamingDetokenizer
from app.engine.measure.toy import ToyModels

TEXTS = [
    "日本語のテキストも少しだけ入れておきます。ありがとうございます。",
    "family 👩‍👩‍👧‍👦 flag 🏳️‍🌈 coder 👩‍💻 thumbs 👍🏽 keycap 1️⃣",
    "def fibonacci(n: int) -> list[int]:\n    return [0, 1][:n]  # ok\n",
    '{"name": "SpecChat", "tags": ["fast", "ü"], "ratio": 0.5, "nested": {"a": null}}',
    "spaces    and\t\ttabs\n\n\n   trailing   \n",
    "<|im_start|>user\nhi<|im_end|>\n",
    "",
]


@pytest.fixture(scope="module")
def tokenizer(toy_models: ToyModels):
    from mlx_lm import load

    return load(str(toy_models.main))[1]


def _stream(tokenizer, ids: list[int]) -> list[str]:
    detok = StreamingDetokenizer(tokenizer)
    segments = [detok.add(i) for i in ids]
    segments.append(detok.finish())
    return segments


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip_without_replacement_chars(tokenizer, text: str) -> None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    segments = _stream(tokenizer, ids)
    assert "".join(segments) == tokenizer.decode(ids) == text
    assert not any("\ufffd" in s for s in segments)


def test_split_characters_are_held_back(tokenizer) -> None:
    ids = tokenizer.encode("👩‍👩‍👧‍👦", add_special_tokens=False)
    assert len(ids) > 1  # the toy vocab splits it inside characters
    segments = _stream(tokenizer, ids)
    assert "" in segments[:-1]
    assert "".join(segments) == "👩‍👩‍👧‍👦"


def test_reset_and_raw_tokenizers(toy_models: ToyModels) -> None:
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(toy_models.main / "tokenizer.json"))
    detok = StreamingDetokenizer(raw)
    for i in raw.encode("abandoned text").ids:
        detok.add(i)
    detok.reset()
    ids = raw.encode(TEXTS[1]).ids
    out = "".join(detok.add(i) for i in ids) + detok.finish()
    assert out == raw.decode(ids, skip_special_tokens=False) == TEXTS[1]


def test_window_stays_small(tokenizer) -> None:
    calls: list[int] = []

    class Counting:
        def decode(self, ids, skip_special_tokens=False):
            calls.append(len(ids))
            return tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    ids = tokenizer.encode(
        " ".join(["The quick brown fox jumps over the lazy dog."] * 40), add_special_tokens=False
    )
    detok = StreamingDetokenizer(Counting())
    for i in ids:
        detok.add(i)
    assert len(ids) > 300, "the text is long enough to matter (over 300 tokens)"
    assert max(calls) <= 4, "decoding a token reads at most 4 tokens back"


def test_invalid_byte_sequences_still_match_decode(tokenizer) -> None:
    # Arbitrary ids (e.g. a random model's output) can form broken UTF-8; the stream must
    # still equal decode(), with U+FFFD only where decode() has it too.
    vocab = sorted(tokenizer.get_vocab().values())
    ids = [vocab[(i * 7919) % len(vocab)] for i in range(400)]
    assert "".join(_stream(tokenizer, ids)) == tokenizer.decode(ids)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=60))
def test_random_unicode_round_trips(tokenizer, text: str) -> None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    segments = _stream(tokenizer, ids)
    assert "".join(segments) == tokenizer.decode(ids)
    if "\ufffd" not in text:
        assert not any("\ufffd" in s for s in segments)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(st.integers(min_value=0, max_value=1023), max_size=40))
def test_random_ids_match_decode(tokenizer, ids: list[int]) -> None:
    assert "".join(_stream(tokenizer, ids)) == tokenizer.decode(ids)


def _byte_token_ids(tokenizer) -> list[int]:
    """Id of the single-byte token for each byte value, via the GPT-2 byte-to-char table."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {b: chr(b) for b in printable}
    chars.update({b: chr(0x100 + n) for n, b in enumerate(sorted(set(range(256)) - set(printable)))})
    vocab = tokenizer.get_vocab()
    return [vocab[chars[b]] for b in range(256)]


def _piece_ids(tokenizer, piece: int | str | bytes) -> list[int]:
    if isinstance(piece, int):
        return [piece]
    data = piece.encode("utf-8") if isinstance(piece, str) else piece
    return [_byte_token_ids(tokenizer)[b] for b in data]


# Byte runs as a broken or random model emits them: whole characters split into single-byte
# tokens, stray bytes (lone continuations, truncated leads), special tokens and any other id.
PIECES = st.one_of(
    st.characters(),
    st.binary(min_size=1, max_size=3),
    st.sampled_from([b"\x80", b"\xf0\x9f", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0"]),
    st.integers(min_value=0, max_value=1023),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(PIECES, max_size=80), skip=st.booleans())
def test_random_byte_runs_match_decode(tokenizer, pieces: list[int | str | bytes], skip: bool) -> None:
    ids = [i for piece in pieces for i in _piece_ids(tokenizer, piece)]
    detok = StreamingDetokenizer(tokenizer, skip_special_tokens=skip)
    out = "".join(detok.add(i) for i in ids) + detok.finish()
    assert out == tokenizer.decode(ids, skip_special_tokens=skip)


@pytest.mark.parametrize("run", [b"\x80", b"\xf0\x9f\x98", b"\xed\xa0\xe2\x82"])
def test_never_completing_byte_run_is_linear(tokenizer, run: bytes) -> None:
    # Each add must decode a bounded window, not the whole run held back behind U+FFFD.
    ids = (_piece_ids(tokenizer, run) * 2_000)[:2_000]  # quadratic work would be 50x the budget
    budget = 20 * len(ids)
    decoded: list[int] = []

    class Counting:
        def decode(self, ids, skip_special_tokens=False):
            decoded.append(len(ids))
            assert sum(decoded) <= budget, "decoded ids grow faster than the tokens"
            return tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    detok = StreamingDetokenizer(Counting())
    segments = [detok.add(i) for i in ids]
    assert sum(map(len, segments)) > len(ids) // 4  # replacement chars flow out as they go
    assert "".join(segments) + detok.finish() == tokenizer.decode(ids)
