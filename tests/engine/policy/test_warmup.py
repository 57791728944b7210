"""Compiling every pass shape before the controller times one."""

import threading

from app.engine.decoding.decode import generate
from app.engine.decoding.events import RoundEvent
from app.engine.decoding.session import ChatSession
from app.engine.decoding.shapes.buckets import PASS_SIZES, STEP_SIZES
from app.engine.decoding.shapes.compiled_step import compiled_step
from app.engine.decoding.shapes.padded_cache import widths_up_to
from app.engine.policy.warmup import (
    DRAFT_STEP_SIZES,
    WARM_CONTEXT,
    compile_pass_shapes,
    compile_steps_at_width,
    warm_up_steps,
)
from tests.engine.helpers import spied


def test_every_draft_length_is_played_once(toy_pair, toy_prompt, monkeypatch):
    played = []

    def spy(session, prompt, *, policy, max_tokens, **kw):
        for event in generate(session, prompt, policy=policy, max_tokens=max_tokens, **kw):
            if isinstance(event, RoundEvent) and event.k:
                played.append(event.k)
            yield event

    monkeypatch.setattr("app.engine.policy.warmup.generate", spy)
    assert compile_pass_shapes(toy_pair, toy_prompt, max_k=4) >= 4
    assert sorted(set(played)) == [1, 2, 3, 4]


def test_without_a_draft_nothing_is_played(toy_pair, toy_prompt):
    from dataclasses import replace

    assert compile_pass_shapes(replace(toy_pair, draft=None), toy_prompt) == 0


def test_every_pass_size_is_compiled_by_both_models_with_progress(toy_pair, toy_prompt):
    """Reads, prefill tails and verify passes run only in these sizes on a GPU (buckets.py):
    the warm-up must meet each once per model, before the pair is reported loaded."""
    pair, main, draft = spied(toy_pair)
    steps: list[tuple[int, int]] = []
    compile_pass_shapes(pair, toy_prompt, max_k=2, progress=lambda done, total: steps.append((done, total)))
    assert set(PASS_SIZES) <= set(main.sizes) and set(PASS_SIZES) <= set(draft.sizes)
    total = warm_up_steps(pair, 2)
    assert total == 2 + 2 * len(PASS_SIZES)
    assert steps == [(i, total) for i in range(1, total + 1)]


def test_with_padded_keys_every_size_meets_every_key_width(toy_pair, toy_prompt):
    """Attention is built per (pass size, key width) on a GPU: a conversation of up to
    WARM_CONTEXT tokens must meet none the warm-up did not run."""
    pair, main, draft = spied(toy_pair)
    steps: list[tuple[int, int]] = []
    compile_pass_shapes(pair, toy_prompt, max_k=1, padded=True, progress=lambda d, t: steps.append((d, t)))
    widths = widths_up_to(WARM_CONTEXT)
    assert widths == [256, 512, 1024, 2048]
    for spy in (main, draft):
        for width in widths:
            for size in PASS_SIZES:
                if 1 < size <= width:
                    assert (width - size, size) in spy.passes, (width, size)
    total = warm_up_steps(pair, 1, padded=True)
    # per model: a read per pass size, attention per key width, the timing of compiled passes
    # and a compiled pass per key width
    assert total == 1 + 2 * len(PASS_SIZES) + 2 * len(widths) + 2 + 2 * len(widths)
    assert steps == [(i, total) for i in range(1, total + 1)]
    assert warm_up_steps(pair, 1, padded=False) == 1 + 2 * len(PASS_SIZES)  # the CPU's default
    # each model's compiled passes were timed against eager ones: sessions follow that by
    # default, and where compiled won, every step size is built at every key width
    choices = ChatSession(pair, padded_keys=True).step_choices
    assert choices.draft is not None
    for spy, choice, sizes in ((main, choices.main, (1, 2)), (draft, choices.draft, DRAFT_STEP_SIZES)):
        assert choice.reason == "measured", "the choice comes from a measurement"
        assert choice.timing is not None and choice.timing.sizes == sizes, (
            "the measurement timed the sizes this model steps in"
        )
        assert choice.compiled == choice.timing.faster
        shapes = compiled_step(spy).shapes
        if choice.compiled:  # the sizes that won, at every key width
            assert {(size, width) for size in choice.sizes for width in widths} <= shapes
        else:  # timed at the prompt's width only, built at no other
            assert not {(size, width) for size in STEP_SIZES for width in widths[1:]} & shapes


def test_a_cancel_stops_the_warm_up_between_steps(toy_pair, toy_prompt):
    pair, main, draft = spied(toy_pair)
    stop = threading.Event()
    steps: list[int] = []
    calls: list[int] = []

    def progress(done: int, total: int) -> None:
        steps.append(done)
        if done == 2:  # both rounds played: only reads from here
            calls.extend([len(main.sizes), len(draft.sizes)])
        if done == 5:
            stop.set()

    compile_pass_shapes(pair, toy_prompt, max_k=2, cancel=stop, progress=progress)
    assert steps == [1, 2, 3, 4, 5]
    assert main.sizes[calls[0] :] == [1, 2, 3], "after the rounds, the main read its pass sizes in order"
    assert len(draft.sizes) == calls[1], "the cancel came before the draft's reads"


def test_compiled_passes_are_built_per_key_width_only_where_sessions_will_run_them(toy_pair, toy_prompt):
    pair, main, _ = spied(toy_pair)
    session = ChatSession(pair, padded_keys=True)
    compile_steps_at_width(session, pair.main, toy_prompt, 512, False)
    assert not compiled_step(main).shapes
    compile_steps_at_width(session, pair.main, toy_prompt, 512, True)
    assert compiled_step(main).shapes == {(size, 512) for size in STEP_SIZES}
    # without padded keys there is nothing to compile over
    compile_steps_at_width(ChatSession(pair, padded_keys=False), pair.main, toy_prompt, 1024, True)
    assert all(width == 512 for _, width in compiled_step(main).shapes)
