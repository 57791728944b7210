"""Compile every pass shape the engine runs before it times, or answers with, any of them.

MLX builds kernels for each new shape on first use, so a shape's first pass can cost several
times the next, and on a GPU a read at a new length can hold an answer for seconds while its
kernels compile. The controller explores a pair with a few rounds
at two draft lengths and a plain step, and prices every other size from them: when those rounds
are the first of their shapes, a paying draft is priced under plain and bypassed. So a fixed-k
round at each size comes first, then a read of every pass size the engine splits its passes
into (`decoding/shapes/buckets.py`) by each model. With padded keys (a GPU), attention is built per
(pass size, key width) too, so every size of several tokens then runs at every key width a
conversation of up to `WARM_CONTEXT` tokens meets; without that, a probe's catch-up read at a
new width pays tens of milliseconds of building, several times the read itself.
With MLX's own attention on CUDA (`kernel_cache.shape_generic_attention`) those widths cost
little more than their work.
Last, with padded keys, each model's short passes are timed eager and compiled
(`shapes/compiled_step.py`): sessions compile a model's passes only where that measured faster,
and for such a model every step size is then compiled at every key width.
`bench` does it before its timed runs; the worker after loading a pair on a GPU, so that compile
time is part of loading, shown as such, and not of the first answer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

import mlx.core as mx

from app.engine.decoding.decode import generate
from app.engine.decoding.events import RoundEvent
from app.engine.decoding.loading import LoadedModel, ModelPair
from app.engine.decoding.policy import FixedDraftLength
from app.engine.decoding.session import ChatSession
from app.engine.decoding.shapes.buckets import PASS_SIZES, STEP_SIZES, on_gpu, run
from app.engine.decoding.shapes.compiled_step import choose, compilable, compiled_step, time_steps
from app.engine.decoding.shapes.padded_cache import widths_up_to
from app.engine.policy.adaptive import MAX_K

WARM_CONTEXT = 2048  # conversations up to this long meet no key width the warm-up did not build
DRAFT_STEP_SIZES = (1, 2)  # a draft step, and a first step that reads one token it lagged


def compiles_per_shape() -> bool:
    """Whether this process's device builds kernels per shape (a GPU: Metal or CUDA). MLX's CPU
    backend runs the same kernels at every shape, so there a warm-up only costs time."""
    return on_gpu()


def warm_up_steps(pair: ModelPair, max_k: int = MAX_K, *, padded: bool | None = None) -> int:
    """How many steps `compile_pass_shapes` reports: one per draft length, one per pass size
    and model, and with padded keys per model one per key width, one timing of compiled passes
    and one per key width for them."""
    if pair.draft is None:
        return 0
    pads = on_gpu() if padded is None else padded  # ChatSession's own default
    widths = len(widths_up_to(WARM_CONTEXT)) if pads else 0
    return max_k + 2 * len(PASS_SIZES) + 2 * widths + (2 + 2 * widths if pads else 0)


def _widths(session: ChatSession, model: LoadedModel, prompt: list[int], width: int) -> None:
    """Every pass size of several tokens ending at key width `width`, so that attention's
    (size, width) shapes are built. Only shapes matter here: the cache is a fresh one filled
    with the prompt repeated, and its offset is set directly before each pass."""
    cache = session.new_cache(model)
    ids = (prompt * (width // len(prompt) + 1))[:width]
    chunk = PASS_SIZES[-1]  # the largest pass size; the last width's entries fill the buffer
    for at in range(0, width, chunk):
        mx.eval(model.model(mx.array(ids[at : at + chunk], dtype=mx.uint32)[None], cache=cache))
    for size in PASS_SIZES:
        if 1 < size <= width:
            for layer in cache:
                layer.offset = width - size
            mx.eval(model.model(mx.array(ids[:size], dtype=mx.uint32)[None], cache=cache))


def _time_steps(session: ChatSession, model: LoadedModel, prompt: list[int], sizes: tuple[int, ...]) -> None:
    """Time `model`'s passes of `sizes` eager and compiled; the result stays with the model,
    where sessions read it (`compiled_step.choose`)."""
    if compilable(session.new_cache(model)):
        time_steps(model.model, lambda: session.new_cache(model), prompt, sizes)


def compile_steps_at_width(
    session: ChatSession, model: LoadedModel, prompt: list[int], width: int, compiled: bool | None
) -> None:
    """Where sessions will compile `model`'s passes: every step size once over buffers of
    `width` entries, so that no answer builds a compiled graph. As in `_widths`, only shapes
    matter: the offset is set directly before each pass."""
    cache = session.new_cache(model)
    choice = choose(model.model, cache, compiled)
    if not choice.compiled:
        return
    step = compiled_step(model.model)
    ids = mx.array((prompt * (STEP_SIZES[-1] // len(prompt) + 1))[: STEP_SIZES[-1]], dtype=mx.uint32)
    mx.eval(model.model(ids[None], cache=cache))  # makes the buffers
    for layer in cache:
        layer.reserve(width)  # while the offset is a real one: growing copies that many entries
    for size in sorted(choice.sizes):
        for layer in cache:
            layer.offset = width - size
        mx.eval(step(cache, ids[:size]))


def _read(session: ChatSession, model: LoadedModel, prompt: list[int], size: int) -> None:
    """One pass of exactly `size` tokens (the prompt repeated) into a fresh cache of the kind
    `session` uses, so nothing is left behind."""
    ids = (prompt * (size // len(prompt) + 1))[:size]
    logits = run(model.model, session.new_cache(model), mx.array(ids, dtype=mx.uint32), False)
    mx.eval(logits)


def compile_pass_shapes(
    pair: ModelPair,
    prompt: list[int],
    max_k: int = MAX_K,
    *,
    cancel: threading.Event | None = None,
    progress: Callable[[int, int], None] | None = None,
    padded: bool | None = None,
    compiled: bool | None = None,
) -> int:
    """One round drafting k tokens for every k up to `max_k`, by default the longest the
    controller plays (fixed k's own first round compiles its size), plain steps with them; then
    a read of every pass size by both models. Returns the rounds played. Needs a draft model;
    without one it does nothing. `progress(done, total)` follows each step; `cancel` stops
    between steps. `padded`: whether the caches pad keys (default: as the session's, on a GPU).
    `compiled`: for which models compiled passes are built, as `ChatSession(compiled_steps=...)`
    (default: where they time faster here)."""
    if pair.draft is None or not prompt:
        return 0
    rounds: list[int] = []

    def round_of(k: int) -> Callable[[], None]:
        # k + 1 tokens: the first round drafts all k, whatever is accepted
        def play() -> None:
            events = generate(
                ChatSession(pair), prompt, policy=FixedDraftLength(k), max_tokens=k + 1, cancel=cancel
            )
            rounds.append(sum(isinstance(e, RoundEvent) for e in events))

        return play

    # only for the kind of cache it makes: nothing is fed to it
    session = ChatSession(pair, padded_keys=padded)
    steps: list[Callable[[], None]] = [round_of(k) for k in range(1, max_k + 1)]
    steps += [partial(_read, session, m, prompt, n) for m in (pair.main, pair.draft) for n in PASS_SIZES]
    if session.padded_keys:
        widths = widths_up_to(WARM_CONTEXT)
        steps += [partial(_widths, session, m, prompt, w) for m in (pair.main, pair.draft) for w in widths]
        steps += [
            partial(_time_steps, session, pair.main, prompt, tuple(n for n in STEP_SIZES if n <= max_k + 1)),
            partial(_time_steps, session, pair.draft, prompt, DRAFT_STEP_SIZES),
        ]
        steps += [
            partial(compile_steps_at_width, session, m, prompt, w, compiled)
            for m in (pair.main, pair.draft)
            for w in widths
        ]
    for done, run_step in enumerate(steps, 1):
        if cancel is not None and cancel.is_set():
            break
        run_step()
        if progress is not None:
            progress(done, len(steps))
    return sum(rounds)
