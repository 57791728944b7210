"""Worker commands for the two measurements that need the loaded models: the losslessness check
and the draft arena.

They run on the engine's worker thread (it owns every MLX object) and stop at the worker's cancel
event. The command and result types are frozen dataclasses because they cross threads; the worker
only dispatches to `run_check` and `run_arena_job`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from app.engine.decoding.events import EngineError
from app.engine.decoding.loading import LoadedModel, ModelLoadError, ModelPair, load_model
from app.engine.decoding.templates import TemplateError, format_chat
from app.engine.features.arena import ArenaProgress, ArenaResult, run_arena, save_results
from app.engine.features.lossless import LosslessReport, check_lossless
from app.engine.measure.bench import BenchPrompt


@dataclass(frozen=True, slots=True)
class CheckLossless:
    """Replay `answer` (token ids) greedily without the draft, after `messages` (the turns before it).

    `prompt_tokens`: the prompt length recorded when the answer was written; a different length
    now means the conversation before it changed, and the replay would compare different things.
    """

    messages: tuple[dict[str, str], ...]
    answer: tuple[int, ...]
    prompt_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class RunArena:
    """Rank `candidates` (draft folders, or arena.LOOKUP) for `main` over `prompts` (empty: built-ins)."""

    main: str
    candidates: tuple[str, ...]
    prompts: tuple[BenchPrompt, ...] = ()
    k: int = 4
    max_tokens: int = 64
    save: bool = True


@dataclass(frozen=True, slots=True)
class ArenaFinished:
    """The ranking, best first; `cancelled` results are partial and were not saved."""

    main: str
    results: tuple[ArenaResult, ...]
    cancelled: bool
    saved: str | None = None


JobEvent = LosslessReport | ArenaProgress | ArenaFinished


def run_check(
    pair: ModelPair | None, command: CheckLossless, cancel: threading.Event
) -> LosslessReport | EngineError:
    if pair is None:
        return EngineError("no model is loaded: load the pair that wrote the answer first", kind="state")
    if not command.answer:
        return EngineError("this answer has no recorded tokens to compare", kind="state")
    try:
        prompt = format_chat(pair.tokenizer, list(command.messages))
    except TemplateError as exc:
        return EngineError(str(exc), kind="template")
    if command.prompt_tokens is not None and command.prompt_tokens != len(prompt):
        return EngineError(
            f"the conversation before this answer changed since it was written (its prompt was "
            f"{command.prompt_tokens} tokens, now {len(prompt)}), so a replay would not be comparable",
            kind="state",
        )
    vocab = _vocab_size(pair.main)
    if vocab is not None and any(not 0 <= t < vocab for t in command.answer):
        return EngineError(
            "the answer has token ids outside the loaded model's vocabulary: it was written by another model",
            kind="state",
        )
    return check_lossless(pair, prompt, list(command.answer), cancel=cancel)


def _vocab_size(model: LoadedModel) -> int | None:
    args = getattr(model.model, "args", None)
    size = getattr(args, "vocab_size", None)
    return int(size) if isinstance(size, int) else None


def run_arena_job(
    pair: ModelPair | None,
    command: RunArena,
    cancel: threading.Event,
    emit: Callable[[JobEvent | EngineError], None],
) -> None:
    """Reuses the loaded main (and a candidate that is the loaded draft) instead of loading twice."""
    if command.k < 1 or command.max_tokens < 2:
        emit(
            EngineError(
                f"the arena needs k ≥ 1 and at least 2 tokens per run (got k={command.k}, "
                f"{command.max_tokens} tokens)",
                kind="state",
            )
        )
        return
    if not command.candidates:
        emit(EngineError("the arena has no candidates: no compatible local draft was found", kind="state"))
        return
    loaded = pair if pair is not None and pair.main.source == command.main else None
    try:
        main = loaded.main if loaded is not None else load_model(command.main)
    except ModelLoadError as exc:
        emit(EngineError(str(exc), kind="load"))
        return
    drafts = {loaded.draft.source: loaded.draft} if loaded is not None and loaded.draft is not None else {}

    def load(path: str) -> LoadedModel:
        return drafts[path] if path in drafts else load_model(path)

    try:
        results = run_arena(
            main,
            list(command.candidates),
            list(command.prompts) or None,
            k=command.k,
            max_tokens=command.max_tokens,
            progress=emit,
            cancel=cancel,
            load=load,
        )
    except TemplateError as exc:
        emit(EngineError(f"the main model's chat template failed: {exc}", kind="template"))
        return
    cancelled = cancel.is_set() and len(results) < len(command.candidates)
    saved = None
    if command.save and not cancelled:
        try:
            saved = str(save_results(command.main, results))
        except OSError as exc:
            emit(EngineError(f"the arena's results could not be saved: {exc}", kind="notice"))
    emit(ArenaFinished(command.main, tuple(results), cancelled, saved))
