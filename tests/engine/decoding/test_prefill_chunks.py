"""Prefill in chunks sized from the measured reading speed: progress and Stop within a second
on a slow device, and never a different answer."""

from __future__ import annotations

import time
from dataclasses import replace
from threading import Event
from typing import Any

import pytest

from app.engine.decoding.chunking import FIRST_CHUNK, GROWTH, MIN_CHUNK, ChunkPacer
from app.engine.decoding.decode import generate
from app.engine.decoding.events import GenerationFinished, PrefillProgress
from app.engine.decoding.loading import ModelPair
from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.decoding.session import ChatSession
from tests.engine.helpers import ForwardSpy, drive


class SlowModel(ForwardSpy):
    """The real model, taking `per_token` seconds more per token read: a slow CPU's prefill."""

    def __init__(self, model: Any, per_token: float) -> None:
        super().__init__(model)
        self.per_token = per_token

    def __call__(self, inputs: Any, cache: Any = None) -> Any:
        time.sleep(self.per_token * int(inputs.shape[-1]))
        return super().__call__(inputs, cache)


def slow(pair: ModelPair, per_token: float) -> tuple[ModelPair, SlowModel]:
    model = SlowModel(pair.main.model, per_token)
    return replace(pair, main=replace(pair.main, model=model), draft=None), model


@pytest.fixture(scope="module")
def long_prompt(toy_prompt) -> list[int]:
    return toy_prompt * 12


@pytest.mark.parametrize("policy", [PlainDecoding, lambda: FixedDraftLength(3)], ids=["plain", "k3"])
def test_small_chunks_give_the_same_answer_as_one_pass(toy_pair, long_prompt, policy):
    whole = ChatSession(toy_pair, prefill_chunk=4096, chunk_seconds=None)
    one_pass = drive(whole, long_prompt, policy(), max_tokens=32, stop_ids=[])
    # a target no pass can meet: every chunk after the first is the smallest
    tiny = ChatSession(toy_pair, chunk_seconds=1e-9)
    chunked = drive(tiny, long_prompt, policy(), max_tokens=32, stop_ids=[])
    sizes = {b.done - a.done for a, b in zip(chunked.progress, chunked.progress[1:])}
    assert sizes <= {FIRST_CHUNK, MIN_CHUNK, *range(1, MIN_CHUNK)} and MIN_CHUNK in sizes
    assert len(chunked.ids) == 32 and chunked.ids == one_pass.ids
    assert chunked.offsets_ok and tiny.tokens == whole.tokens


def test_a_slow_device_reads_in_chunks_that_report_well_within_a_second(toy_pair, long_prompt):
    pair, model = slow(toy_pair, per_token=0.02)  # 50 tokens a second
    session = ChatSession(pair)
    seen: list[float] = []
    for event in generate(session, long_prompt, policy=PlainDecoding(), max_tokens=1, stop_ids=[]):
        if isinstance(event, PrefillProgress):
            seen.append(event.seconds)
    gaps = [b - a for a, b in zip(seen, seen[1:])]
    reads = [n for _, n in model.passes][: len(gaps)]
    assert sum(reads) == len(long_prompt) - 1  # the prompt less its last token, which is pending
    assert max(reads) <= 32 and max(gaps) < 0.9, (reads, gaps)
    assert seen[-1] > 2.0  # the prompt took seconds: without chunks, seconds without news


def test_a_cancel_during_prefill_stops_within_one_chunk(toy_pair, long_prompt):
    pair, model = slow(toy_pair, per_token=0.01)
    session = ChatSession(pair)
    cancel = Event()
    events = generate(session, long_prompt, policy=PlainDecoding(), max_tokens=8, cancel=cancel, stop_ids=[])
    read_at_cancel = 0
    for event in events:
        if isinstance(event, PrefillProgress) and event.done > 0 and not cancel.is_set():
            cancel.set()
            read_at_cancel, passes_at_cancel, at = event.done, len(model.passes), time.perf_counter()
    assert isinstance(event, GenerationFinished) and event.reason == "cancelled" and not event.token_ids
    assert len(model.passes) == passes_at_cancel and len(session.tokens) == read_at_cancel
    assert time.perf_counter() - at < 0.5
    assert 0 < read_at_cancel < len(long_prompt) - 1


def test_the_pacer_sizes_chunks_from_the_speed_it_measured():
    pacer = ChunkPacer(512, seconds=0.4)
    assert pacer.size("main") == FIRST_CHUNK
    pacer.record("main", FIRST_CHUNK, FIRST_CHUNK, 2.0)  # 8 tokens a second: a big main on a slow CPU
    assert pacer.size("main") == MIN_CHUNK
    assert pacer.size("draft") == MIN_CHUNK  # untimed: as slow as the main
    pacer.record("main", MIN_CHUNK, 1, 1.0)  # a tail: overhead, not speed
    assert pacer.rates["main"] == 8.0
    for _ in range(5):  # a GPU: each pass far under the target, growing GROWTH-fold to the largest
        size = pacer.size("main")
        pacer.record("main", size, size, 0.001)
    assert pacer.size("main") == 512 and pacer.sizes["main"] == 512
    assert ChunkPacer(512, seconds=None).size("main") == 512
    grown = ChunkPacer(100, seconds=0.4)
    grown.record("main", 16, 16, 0.01)
    assert grown.size("main") == 16 * GROWTH
