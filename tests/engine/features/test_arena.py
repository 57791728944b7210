"""The draft arena on the toy pair: a matched draft, an unrelated one, prompt lookup, a broken path."""

from __future__ import annotations

import threading

from app.engine.features.arena import (
    ARENA_PROMPTS,
    LOOKUP,
    load_results,
    results_path,
    run_arena,
    save_results,
)
from app.engine.features.prompts import PROMPT_CLASSES


def test_arena_prompts_cover_every_class():
    assert {p.prompt_class for p in ARENA_PROMPTS} == set(PROMPT_CLASSES)


def test_ranks_candidates_and_persists(toy_pair, toy_models, tmp_path, specchat_home_engine):
    seen = []
    prompts = [p for p in ARENA_PROMPTS if p.prompt_class in ("code", "repetitive")]
    candidates = [str(toy_models.draft_random), str(toy_models.draft), LOOKUP, str(tmp_path / "missing")]
    results = run_arena(
        toy_pair.main, candidates, prompts, k=3, max_tokens=12, warmup_tokens=2, progress=seen.append
    )
    assert [p.done for p in seen] == list(range(len(seen) - 1)) + [seen[-1].total]
    assert seen[-1].total == len(prompts) * (1 + len(candidates))
    ok = [r for r in results if r.error is None]
    assert {r.candidate for r in ok} == set(candidates[:3])
    assert results[-1].candidate == candidates[3], "the failing candidate is reported last"
    assert results[-1].error, "with its error"
    assert [r.speedup for r in ok] == sorted((r.speedup for r in ok), reverse=True)
    by_name = {r.candidate: r for r in ok}
    matched, unrelated = by_name[str(toy_models.draft)], by_name[str(toy_models.draft_random)]
    assert matched.acceptance > unrelated.acceptance  # the toy draft is distilled from the main
    assert matched.best_k is not None and 1 <= matched.best_k <= 3
    assert all(r.speedup > 0 for r in ok), "every candidate that ran has a speedup"
    assert all(r.plain_tok_s > 0 for r in ok), "every candidate that ran has a plain rate to compare with"
    assert {c for c, _ in matched.by_class} == {"code", "repetitive"}
    path = save_results("/models/toy-main", results)
    assert path == results_path("/models/toy-main"), "results are saved where the app reads them"
    assert str(specchat_home_engine) in str(path), "inside SpecChat's own folder"
    assert load_results("/models/toy-main") == results


def test_cancel_stops_between_runs(toy_pair, toy_models):
    cancel = threading.Event()
    seen = []

    def progress(p):
        seen.append(p)
        if p.done == 1:
            cancel.set()

    results = run_arena(
        toy_pair.main,
        [str(toy_models.draft)],
        ARENA_PROMPTS[:2],
        max_tokens=8,
        warmup_tokens=2,
        progress=progress,
        cancel=cancel,
    )
    assert results == [], "a cancelled arena gives no results"
    assert len(seen) == 2, "no progress after the run that saw the cancel"


def test_missing_results_are_empty(specchat_home_engine):
    assert load_results("/nowhere") == []


import pytest  # noqa: E402


@pytest.fixture
def specchat_home_engine(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("SPECCHAT_HOME", str(home))
    return home
