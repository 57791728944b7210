"""Pass sizes: on a GPU every pass is split into a few fixed sizes, and the answer is unchanged."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.models.cache import RotatingKVCache

from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.decoding.session import PREFILL_CHUNK, ChatSession
from app.engine.decoding.shapes.buckets import PASS_SIZES, READ_SIZES, STEP_SIZES, on_gpu, passes, run, split
from app.engine.decoding.shapes.padded_cache import PaddedKVCache
from app.engine.policy.adaptive import MAX_K, AdaptiveDraftLength
from tests.engine.decoding.test_cache_property import ScriptedPolicy
from tests.engine.helpers import drive, spied


def test_every_length_splits_exactly_into_pass_sizes_largest_first():
    assert split(125) == [64, 32, 16, 9, 4]
    assert split(0) == []
    for n in range(1, 1100):
        pieces = split(n)
        assert sum(pieces) == n, f"the pieces of {n} tokens add up to {n}"
        assert set(pieces) <= set(PASS_SIZES), f"every piece of {n} tokens is a pass size"
        assert pieces == sorted(pieces, reverse=True)


def test_a_read_is_whole_chunks_then_one_padded_pass_where_caches_can_trim():
    assert passes(17, pad=True) == [(32, 17)]
    assert passes(125, pad=True) == [(128, 125)]
    assert passes(512, pad=True) == [(512, 512)]
    assert passes(1100, pad=True) == [(512, 512), (512, 512), (128, 76)]
    assert passes(17, pad=False) == [(16, 16), (1, 1)]
    for n in range(1, 1100):
        assert sum(real for _, real in passes(n, pad=True)) == n
        padded = passes(n, pad=True)
        assert all(size in PASS_SIZES for size, _ in padded), f"{n} tokens: every pass is a pass size"
        assert all(real <= size for size, real in padded), f"{n} tokens: no pass holds more than its size"


def _logits_and_offset(pair, ids, bucketed, cache=None):
    model = pair.draft.model
    cache = cache if cache is not None else ChatSession(pair).new_cache(pair.draft)
    run(model, cache, mx.array(ids[:40], dtype=mx.uint32), bucketed)  # a context to read after
    logits = run(model, cache, mx.array(ids[40:], dtype=mx.uint32), bucketed)
    return logits, [layer.offset for layer in cache]


def test_a_padded_read_gives_the_exact_reads_logits_and_leaves_no_pad_behind(toy_pair):
    ids = toy_pair.tokenizer.encode("def fibonacci(n):\n    # return the n-th number, " * 4)[:57]
    exact, offsets = _logits_and_offset(toy_pair, ids, bucketed=False)
    padded, padded_offsets = _logits_and_offset(toy_pair, ids, bucketed=True)  # 40 -> 64, 17 -> 32
    assert padded.shape == exact.shape, "padded passes give logits of the exact shape"
    assert padded_offsets == offsets == [57] * len(offsets), "padding leaves the cache at the real length"
    assert mx.allclose(padded, exact, atol=1e-4).item()
    # a cache that cannot give entries back is read in exact pieces
    rotating = [RotatingKVCache(max_size=512) for _ in toy_pair.draft.model.layers]
    split_logits, split_offsets = _logits_and_offset(toy_pair, ids, bucketed=True, cache=rotating)
    assert split_offsets == offsets, "a rotating cache ends at the real length"
    assert mx.allclose(split_logits, exact, atol=1e-4).item(), "a rotating cache gives the exact logits"


def test_the_sizes_cover_the_longest_verify_and_a_whole_prefill_chunk():
    assert MAX_K + 1 in STEP_SIZES  # pending plus the controller's longest draft: one pass
    assert PREFILL_CHUNK in READ_SIZES


def test_bucketing_follows_the_device_unless_forced(toy_pair):
    assert ChatSession(toy_pair).bucketed is on_gpu()
    assert ChatSession(toy_pair).padded_keys is on_gpu()
    assert ChatSession(toy_pair, bucketed=True).bucketed


def _policies():
    return {
        "plain": PlainDecoding,
        "fixed3": lambda: FixedDraftLength(3),
        "fixed12": lambda: FixedDraftLength(12),  # verify passes of 13 tokens: split
        # plain stretches the draft then reads back in one odd-sized first step
        "scripted": lambda: ScriptedPolicy([0, 0, 0, 5, 0, 0, 2, 7]),
        "skipping": lambda: ScriptedPolicy([0, 0, 0, 0, 4], read_limit=2),
        "adaptive": AdaptiveDraftLength,
    }


def _conversation(session, pair, policy_factory):
    """Three turns of odd lengths; the third edits back into the second answer."""
    tok = pair.tokenizer
    first = tok.encode("def fibonacci(n):\n    # return the n-th number\n")
    a = drive(session, first, policy_factory(), max_tokens=37, stop_ids=[])
    second = first + a.ids + tok.encode("\n# and now a longer question " * 13)
    b = drive(session, second, policy_factory(), max_tokens=45, stop_ids=[])
    third = (second + b.ids)[: len(second) + 11] + tok.encode(" edit")
    c = drive(session, third, policy_factory(), max_tokens=29, stop_ids=[])
    assert a.offsets_ok, "the first answer kept the caches in step"
    assert b.offsets_ok, "the second answer kept the caches in step"
    assert c.offsets_ok, "the answer after the edit kept the caches in step"
    assert not (a.notices or b.notices or c.notices)  # no cache was found wrong and rebuilt
    return [a.ids, b.ids, c.ids], len(third)


@pytest.mark.parametrize("name", list(_policies()))
def test_bucketed_passes_and_padded_keys_give_the_unbucketed_answers(toy_pair, name):
    factory = _policies()[name]
    plain, _ = _conversation(ChatSession(toy_pair, bucketed=False, padded_keys=False), toy_pair, factory)
    session = ChatSession(toy_pair, bucketed=True, padded_keys=True)
    bucketed, context = _conversation(session, toy_pair, factory)
    assert bucketed == plain
    assert context > 256  # the keys' padded length stepped at least once
    assert all(isinstance(c, PaddedKVCache) for c in session.main_cache)


def test_with_buckets_every_model_call_is_a_pass_size(toy_pair):
    """Prefill tails, catch-up reads, first draft steps and verify passes, for both models."""
    pair, main, draft = spied(toy_pair)
    for name, factory in _policies().items():
        _conversation(ChatSession(pair, bucketed=True, padded_keys=True), pair, factory)
        assert set(main.sizes) <= set(PASS_SIZES), name
        assert set(draft.sizes) <= set(PASS_SIZES), name
    assert len(set(main.sizes)) > 5 and len(set(draft.sizes)) > 5  # many sizes were met


def test_without_buckets_the_same_conversation_meets_other_sizes(toy_pair):
    """What the check above would catch: the check can fail."""
    pair, main, draft = spied(toy_pair)
    # prefill chunks of one size whatever this machine's speed, so the sizes met are the conversation's
    _conversation(ChatSession(pair, bucketed=False, chunk_seconds=None), pair, _policies()["scripted"])
    assert not set(main.sizes) <= set(PASS_SIZES)
    assert not set(draft.sizes) <= set(PASS_SIZES)


def test_a_step_runs_the_step_sizes_and_the_plain_pass_runs_where_it_declines(toy_pair):
    model = toy_pair.draft.model
    asked: list[int] = []

    def step(cache, ids):
        asked.append(ids.shape[0])
        return None if ids.shape[0] == 2 else mx.zeros((1, ids.shape[0], 7))

    cache = [PaddedKVCache() for _ in model.layers]
    ids = mx.arange(3, 40, dtype=mx.uint32)
    assert run(model, cache, ids[:1], False, step=step).shape == (1, 1, 7)  # the step's own
    assert cache[0].offset == 0  # (this one did not feed the cache)
    declined = run(model, cache, ids[:2], True, step=step)
    assert declined.shape == (1, 2, model.args.vocab_size), "a declined step still gives the pass's logits"
    assert cache[0].offset == 2, "the eager pass fed the cache"
    run(model, cache, ids[:16], True, step=step)
    assert asked == [1, 2], "only the one- and two-token passes are offered to the step"
    assert cache[0].offset == 18, "the read fed the cache"  # a read is never offered to the step
