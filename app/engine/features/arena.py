"""The draft arena: which local draft (or prompt lookup) actually speeds up a given main model.

For each prompt of a small set it times plain decoding once, then every candidate, with the
same engine code the chat uses; the speedup is the candidate's decode rate over plain's on the
same prompt, averaged geometrically over prompts. Acceptance and the oracle's best fixed k come
from the candidate's measured rounds. Results persist per main model as JSON, so the picker can
show them next to each draft.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from app.engine.decoding.events import EngineError, ErrorKind
from app.engine.decoding.loading import LoadedModel, ModelLoadError, ModelPair, load_model
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.session import ChatSession
from app.engine.decoding.templates.chat import TemplateError, format_chat
from app.engine.features.figures import percent_text, speedup_text
from app.engine.features.prompts import BUILTIN_PROMPTS, BenchPrompt
from app.engine.features.timed_run import run_timed
from app.engine.library.pairing import require_compatible
from app.engine.library.paths import app_data_dir
from app.engine.policy.modes import Memory, SpeculationMode, make_policy, remembered
from app.engine.policy.oracle import RoundRecord, best_fixed

LOOKUP = "lookup"  # the candidate that needs no model: prompt lookup
ARENA_PROMPTS: tuple[BenchPrompt, ...] = tuple(
    p for p in BUILTIN_PROMPTS if p.id in ("code-1", "prose-1", "repetitive-1", "creative-1")
)


@dataclass(frozen=True, slots=True)
class ArenaResult:
    """One candidate's score; `error` is set (and speedup 0) when it could not run."""

    candidate: str  # a draft's path, or LOOKUP
    speedup: float  # geometric mean over prompts of tok/s over plain tok/s
    acceptance: float | None  # accepted over proposed; None when nothing was proposed (lookup found no match)
    best_k: int | None  # the oracle's best fixed k, from the measured rounds
    tok_s: float
    plain_tok_s: float
    by_class: tuple[tuple[str, float], ...] = ()
    error: str | None = None
    best_k_speedup: float | None = None  # the oracle's predicted speedup at best_k (< 1: plain wins)


@dataclass(frozen=True, slots=True)
class ArenaProgress:
    done: int
    total: int
    label: str


@dataclass(frozen=True, slots=True)
class ArenaFinished:
    """The ranking, best first; `cancelled` results are partial and were not saved."""

    main: str
    results: tuple[ArenaResult, ...]
    cancelled: bool
    saved: str | None = None


def _mode(candidate: str) -> SpeculationMode:
    """Prompt lookup runs as the app's lookup mode (adaptive, kept across the candidate's
    answers); a draft runs fixed k, whose rounds the oracle reads for the best k."""
    return SpeculationMode.LOOKUP if candidate == LOOKUP else SpeculationMode.FIXED


def run_arena(
    main: LoadedModel,
    candidates: list[str],
    prompts: list[BenchPrompt] | None = None,
    *,
    k: int = 4,
    max_tokens: int = 64,
    warmup_tokens: int = 4,
    progress: Callable[[ArenaProgress], None] | None = None,
    cancel: threading.Event | None = None,
    load: Callable[[str], LoadedModel] = load_model,
    memory: Memory | None = None,
) -> list[ArenaResult]:
    """Rank `candidates` by measured speedup over plain, best first. Checks `cancel` between runs.
    With a `memory`, prompt lookup starts from, and saves to, what the app learnt about it."""
    prompts = list(prompts or ARENA_PROMPTS)
    sampling = SamplingParams()
    encoded = [format_chat(main.tokenizer, [{"role": "user", "content": p.text}]) for p in prompts]
    plain_pair = ModelPair(main, None)
    total = len(prompts) * (1 + len(candidates))
    done = 0

    def step(label: str) -> bool:
        nonlocal done
        if progress:
            progress(ArenaProgress(done, total, label))
        done += 1
        return cancel is not None and cancel.is_set()

    plain_policy = make_policy(SpeculationMode.OFF)
    run_timed(plain_pair, encoded[0], plain_policy, sampling, warmup_tokens)
    plain: list[float] = []
    plain_log: list[RoundRecord] = []  # plain steps give the oracle the cost of a one-token verify
    for p, ids in zip(prompts, encoded):
        if step(f"plain · {p.id}"):
            return []
        t = run_timed(plain_pair, ids, plain_policy, sampling, max_tokens)
        plain.append(t.decode_rate)
        plain_log += t.log
    results: list[ArenaResult] = []
    for candidate in candidates:
        try:
            pair = plain_pair if candidate == LOOKUP else ModelPair(main, load(candidate))
            refusal = ChatSession(pair).speculation_refusal if pair.draft else None
        except Exception as exc:
            refusal = str(exc)
        if refusal:
            done += len(prompts)
            results.append(ArenaResult(candidate, 0.0, 0.0, None, 0.0, _mean(plain), error=refusal))
            continue
        # the candidate's own, as a freshly loaded pair's: from what the app learnt about it here
        policies = remembered(memory, main.source, None if candidate == LOOKUP else candidate)
        run_timed(pair, encoded[0], policies.policy(_mode(candidate), k), sampling, warmup_tokens)
        rates: list[float] = []
        ratios: list[float] = []
        classes: dict[str, list[float]] = {}
        log: list[RoundRecord] = []
        proposed = accepted = 0
        for p, ids, base in zip(prompts, encoded, plain):
            if step(f"{Path(candidate).name} · {p.id}"):
                return _ranked(results)
            t = run_timed(pair, ids, policies.policy(_mode(candidate), k), sampling, max_tokens)
            policies.answered(_mode(candidate))
            rate = t.decode_rate
            rates.append(rate)
            ratio = rate / base if base > 0 and rate > 0 else 0.0
            ratios.append(ratio)
            classes.setdefault(p.prompt_class, []).append(ratio)
            proposed, accepted = proposed + t.proposed, accepted + t.accepted
            log += t.log
        oracle = best_fixed(plain_log + log)
        results.append(
            ArenaResult(
                candidate,
                _geomean(ratios),
                accepted / proposed if proposed else None,
                oracle.best_k if oracle else None,
                _mean(rates),
                _mean(plain),
                tuple((c, _geomean(v)) for c, v in classes.items()),
                best_k_speedup=oracle.predicted_speedup if oracle else None,
            )
        )
    if progress:
        progress(ArenaProgress(total, total, "done"))
    return _ranked(results)


def run_arena_job(
    pair: ModelPair | None,
    main: str,
    candidates: tuple[str, ...],
    prompts: tuple[BenchPrompt, ...],
    *,
    k: int,
    max_tokens: int,
    save: bool,
    cancel: threading.Event,
    emit: Callable[[ArenaProgress | ArenaFinished | EngineError], None],
    memory: Memory | None = None,
) -> None:
    """The arena as the worker runs it: checks, progress, the saved ranking or an error.

    Reuses the loaded main (and a candidate that is the loaded draft) instead of loading twice."""
    if k < 1 or max_tokens < 2:
        emit(
            EngineError(
                f"the arena needs k ≥ 1 and at least 2 tokens per run (got k={k}, {max_tokens} tokens)",
                kind=ErrorKind.STATE,
            )
        )
        return
    if not candidates:
        emit(
            EngineError(
                "the arena has no candidates: no compatible local draft was found", kind=ErrorKind.STATE
            )
        )
        return
    loaded = pair if pair is not None and pair.main.source == main else None
    try:
        model = loaded.main if loaded is not None else load_model(main)
    except ModelLoadError as exc:
        emit(EngineError(str(exc), kind=ErrorKind.LOAD, plain=exc.plain))
        return
    drafts = {loaded.draft.source: loaded.draft} if loaded is not None and loaded.draft is not None else {}

    def load(path: str) -> LoadedModel:
        require_compatible(main, path)  # the picker's rules hold here too; refused: the result's error
        return drafts[path] if path in drafts else load_model(path)

    try:
        results = run_arena(
            model,
            list(candidates),
            list(prompts) or None,
            k=k,
            max_tokens=max_tokens,
            progress=emit,
            cancel=cancel,
            load=load,
            memory=memory,
        )
    except TemplateError as exc:
        emit(EngineError(f"the main model's chat template failed: {exc}", kind=ErrorKind.TEMPLATE))
        return
    cancelled = cancel.is_set() and len(results) < len(candidates)
    saved = None
    if save and not cancelled:
        try:
            saved = str(save_results(main, results))
        except OSError as exc:
            emit(EngineError(f"the arena's results could not be saved: {exc}", kind=ErrorKind.NOTICE))
    emit(ArenaFinished(main, tuple(results), cancelled, saved))


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def _ranked(results: list[ArenaResult]) -> list[ArenaResult]:
    return sorted(results, key=lambda r: (r.error is None, r.speedup), reverse=True)


def results_path(main: str) -> Path:
    """One JSON file per main model, under the app-data folder."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in main.strip("/"))
    return app_data_dir() / "arena" / f"{safe}.json"


def save_results(main: str, results: list[ArenaResult]) -> Path:
    path = results_path(main)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"main": main, "results": [asdict(r) for r in results]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


def load_results(main: str) -> list[ArenaResult]:
    """The last arena for `main`, best first; empty when none was run or the file is unreadable."""
    try:
        data = json.loads(results_path(main).read_text(encoding="utf-8"))
        return [
            ArenaResult(**{**r, "by_class": tuple(tuple(c) for c in r.get("by_class", ()))})
            for r in data["results"]
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def best_k_text(result: ArenaResult) -> str:
    """The oracle's best fixed k with its estimated speedup (a formula over the measured rounds,
    not a run), and a warning when even that k would not beat plain decoding."""
    if not result.best_k:
        return "—"
    if result.best_k_speedup is None:
        return str(result.best_k)
    if result.best_k_speedup < 1:
        return f"{result.best_k} (estimated: plain wins)"
    return f"{result.best_k} (estimated {speedup_text(result.best_k_speedup)})"


def arena_note(result: ArenaResult) -> str:
    """The short form the picker shows next to a draft."""
    if result.error:
        return "arena: could not run"
    k = f", best k {best_k_text(result)}" if result.best_k else ""
    accepted = (
        "nothing proposed" if result.acceptance is None else f"{percent_text(result.acceptance)} accepted"
    )
    return f"arena: {speedup_text(result.speedup)} vs plain (measured), {accepted}{k}"
