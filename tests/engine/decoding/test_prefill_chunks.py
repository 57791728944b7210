"""Prefill in chunks sized from the measured reading speed: progress and Stop within a second
on a slow device, and never a different answer."""

from __future__ import annotations

from dataclasses import replace
from threading import Event
from typing import Any

import pytest

from app.engine.decoding import session as session_module
from app.engine.decoding.chunking import FIRST_CHUNK, FIXED_SHARE, ChunkPacer, fit
from app.engine.decoding.decode import generate
from app.engine.decoding.events import GenerationFinished, PrefillProgress
from app.engine.decoding.loading import ModelPair
from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.decoding.session import ChatSession
from tests.engine.helpers import ForwardSpy, drive


class DeviceClock:
    """The session's clock, moved only by the simulated device: chunk sizes and progress times
    then follow the device's speed, never how busy this machine is."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class SlowModel(ForwardSpy):
    """The real model, taking `per_pass` seconds more per pass and `per_token` more per token
    read on `clock`: a slow CPU's prefill (there a pass reads every weight once, whatever its
    length)."""

    def __init__(self, model: Any, clock: DeviceClock, per_token: float, per_pass: float) -> None:
        super().__init__(model)
        self.clock, self.per_token, self.per_pass = clock, per_token, per_pass

    def __call__(self, inputs: Any, cache: Any = None) -> Any:
        self.clock.now += self.per_pass + self.per_token * int(inputs.shape[-1])
        return super().__call__(inputs, cache)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> DeviceClock:
    device = DeviceClock()
    monkeypatch.setattr(session_module, "time", device)
    return device


def slow(
    pair: ModelPair, clock: DeviceClock, per_token: float, per_pass: float = 0.0
) -> tuple[ModelPair, SlowModel]:
    model = SlowModel(pair.main.model, clock, per_token, per_pass)
    return replace(pair, main=replace(pair.main, model=model), draft=None), model


@pytest.fixture(scope="module")
def long_prompt(toy_prompt) -> list[int]:
    return toy_prompt * 12


@pytest.mark.parametrize("policy", [PlainDecoding, lambda: FixedDraftLength(3)], ids=["plain", "k3"])
def test_small_chunks_give_the_same_answer_as_one_pass(toy_pair, long_prompt, policy):
    whole = ChatSession(toy_pair, prefill_chunk=4096, chunk_seconds=None)
    one_pass = drive(whole, long_prompt, policy(), max_tokens=32, stop_ids=[])
    # a target no pass can meet: chunks of 16 tokens at most, of several sizes
    tiny = ChatSession(toy_pair, prefill_chunk=FIRST_CHUNK, chunk_seconds=1e-9)
    chunked = drive(tiny, long_prompt, policy(), max_tokens=32, stop_ids=[])
    sizes = [b.done - a.done for a, b in zip(chunked.progress, chunked.progress[1:])]
    assert len(sizes) > 10, f"a long prompt is read in many chunks: {sizes}"
    assert len(set(sizes)) > 1, f"the chunks change size: {sizes}"
    assert max(sizes) <= FIRST_CHUNK, f"no chunk is larger than the first: {sizes}"
    assert len(chunked.ids) == 32, "all 32 tokens are given"
    assert chunked.ids == one_pass.ids, "chunked reading gives the one-pass answer"
    assert chunked.offsets_ok, "every round left the caches in step with the tokens"
    assert tiny.tokens == whole.tokens, "a tiny chunk reads the same tokens as the whole"


def test_a_slow_device_reads_in_chunks_that_report_well_within_a_second(toy_pair, long_prompt, clock):
    pair, model = slow(toy_pair, clock, per_token=0.02)  # 50 tokens a second
    session = ChatSession(pair)
    seen: list[float] = []
    for event in generate(session, long_prompt, policy=PlainDecoding(), max_tokens=1, stop_ids=[]):
        if isinstance(event, PrefillProgress):
            seen.append(event.seconds)
    gaps = [b - a for a, b in zip(seen, seen[1:])]
    reads = [n for _, n in model.passes][: len(gaps)]
    assert sum(reads) == len(long_prompt) - 1  # the prompt less its last token, which is pending
    assert max(reads) <= 32, f"no read past 32 tokens: {reads}"
    assert max(gaps) < 0.9, f"no pause of 0.9 s or more between reads: {gaps}"
    assert seen[-1] > 2.0  # the prompt took seconds: without chunks, seconds without news


def test_a_fixed_cost_per_pass_does_not_shrink_the_chunks_to_nothing(toy_pair, long_prompt, clock):
    """A 0.5B model in 32-bit on this CPU: 0.18 s a pass plus 0.014 s a token. Its speed timed
    on 16 tokens (46 tokens a second) would ask for 4-token chunks, at 13 tokens a second."""
    pair, model = slow(toy_pair, clock, per_token=0.014, per_pass=0.18)
    session = ChatSession(pair)
    for _ in generate(session, long_prompt, policy=PlainDecoding(), max_tokens=1, stop_ids=[]):
        pass
    reads = [n for _, n in model.passes][:-1]  # the last pass is the answer's step
    assert sum(reads) == len(long_prompt) - 1
    assert reads[:-1] and min(reads[:-1]) >= 16, f"every read but the last is at least 16 tokens: {reads}"
    assert max(reads) <= 32, f"no read past 32 tokens: {reads}"  # 0.4-0.6 s each


def test_a_cancel_during_prefill_stops_within_one_chunk(toy_pair, long_prompt, clock):
    pair, model = slow(toy_pair, clock, per_token=0.01)
    session = ChatSession(pair)
    cancel = Event()
    events = generate(session, long_prompt, policy=PlainDecoding(), max_tokens=8, cancel=cancel, stop_ids=[])
    read_at_cancel = 0
    for event in events:
        if isinstance(event, PrefillProgress) and event.done > 0 and not cancel.is_set():
            cancel.set()
            read_at_cancel, passes_at_cancel = event.done, len(model.passes)
    assert isinstance(event, GenerationFinished), "the answer finishes"
    assert event.reason == "cancelled", "a cancelled prefill ends as cancelled"
    assert not event.token_ids, "with no tokens"
    assert len(model.passes) == passes_at_cancel, "no pass runs after the cancel"
    assert len(session.tokens) == read_at_cancel, "nothing more is read after the cancel"
    assert 0 < read_at_cancel < len(long_prompt) - 1


def test_the_pacer_fits_a_cost_per_pass_and_per_token():
    pacer = ChunkPacer(512, seconds=0.5)
    assert pacer.size("main") == FIRST_CHUNK
    pacer.record("main", 16, 16, 0.4)  # 40 tokens a second, as far as one size tells
    assert pacer.size("main") == 16 and pacer.size("draft") == 16  # an untimed draft: as the main
    pacer.record("main", 16, 4, 0.25)  # a tail: the fit sees 0.2 s a pass, 0.0125 s a token
    assert fit(pacer.times["main"]) == pytest.approx((0.2, 0.0125))
    assert pacer.size("main") == 16  # 32 would take 0.6 s
    pacer.record("main", 16, 16, 0.3)  # timed again at 16: smoothed
    assert pacer.times["main"][16] == pytest.approx(0.35)


def test_a_big_model_on_a_slow_cpu_pays_its_fixed_cost_at_most_a_third_of_a_pass():
    pacer = ChunkPacer(512, seconds=0.5)
    pacer.record("main", 16, 16, 1.2)
    pacer.record("main", 4, 4, 0.87)  # 0.76 s a pass, 0.0275 s a token
    assert pacer.size("main") == 16  # a chunk grows at most 4 times a pass
    pacer.record("main", 16, 16, 1.2)
    # 2.28 s budget (3x the fixed part): 32 tokens take 1.64 s, 64 would take 2.52 s
    assert pacer.size("main") == 32
    overhead, per_token = fit(pacer.times["main"])
    assert overhead <= (overhead + per_token * pacer.size("main")) * FIXED_SHARE * 1.5


def test_a_fast_device_reaches_the_largest_chunk_in_a_few_passes():
    pacer = ChunkPacer(512, seconds=0.5)
    sizes = []
    for _ in range(4):
        size = pacer.size("main")
        sizes.append(size)
        pacer.record("main", size, size, 0.002 + size * 1e-5)
    assert sizes == [16, 64, 256, 512]
    assert ChunkPacer(512, seconds=None).size("main") == 512
    odd = ChunkPacer(100, seconds=0.5)
    odd.record("main", 16, 16, 0.001)
    odd.record("main", 64, 64, 0.002)
    assert odd.size("main") == 100, "an odd limit caps the chunk size"
    assert odd.ladder == [4, 8, 16, 32, 64, 100], "the ladder ends at the limit"
