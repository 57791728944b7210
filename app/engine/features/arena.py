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

from app.engine.decoding.loading import LoadedModel, ModelPair, load_model
from app.engine.decoding.policy import DraftPolicy, FixedDraftLength, PlainDecoding
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.session import ChatSession
from app.engine.decoding.templates import format_chat
from app.engine.library.paths import app_data_dir
from app.engine.measure.bench import BUILTIN_PROMPTS, BenchPrompt, _run_ours, _Timing
from app.engine.measure.oracle import best_fixed
from app.engine.policy.adaptive import AdaptiveDraftLength

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


def _rate(t: _Timing) -> float:
    span = t.stamps[-1] - t.stamps[0] if len(t.stamps) > 1 else 0.0
    return (len(t.stamps) - 1) / span if span > 0 else 0.0


def _policy(candidate: str, k: int) -> DraftPolicy:
    return AdaptiveDraftLength(use_draft=False) if candidate == LOOKUP else FixedDraftLength(k)


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
) -> list[ArenaResult]:
    """Rank `candidates` by measured speedup over plain, best first. Checks `cancel` between runs."""
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

    _run_ours(plain_pair, encoded[0], PlainDecoding(), sampling, warmup_tokens)
    plain: list[float] = []
    plain_log: list = []  # plain steps give the oracle the cost of a one-token verify
    for p, ids in zip(prompts, encoded):
        if step(f"plain · {p.id}"):
            return []
        t = _run_ours(plain_pair, ids, PlainDecoding(), sampling, max_tokens)
        plain.append(_rate(t))
        plain_log += t.log or []
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
        _run_ours(pair, encoded[0], _policy(candidate, k), sampling, warmup_tokens)
        rates, ratios, classes, log = [], [], {}, []
        proposed = accepted = 0
        for p, ids, base in zip(prompts, encoded, plain):
            if step(f"{Path(candidate).name} · {p.id}"):
                return _ranked(results)
            t = _run_ours(pair, ids, _policy(candidate, k), sampling, max_tokens)
            rate = _rate(t)
            rates.append(rate)
            ratio = rate / base if base > 0 and rate > 0 else 0.0
            ratios.append(ratio)
            classes.setdefault(p.prompt_class, []).append(ratio)
            proposed, accepted = proposed + t.proposed, accepted + t.accepted
            log += t.log or []
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
