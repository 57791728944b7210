"""Residual speculation samples exactly from the main's distribution; a broken rule does not.

The statistical test runs the real decode loop thousands of times on a fast one-layer pair (the
toy draft as the main, a perturbed copy as the draft) with top-k 3, and compares the joint
frequencies of the first three tokens with the main's exact distribution by chi-square. The
three tokens go through acceptance, rejection with a residual draw, and the bonus token.
"""

from __future__ import annotations

import itertools
import math
import shutil
from collections import Counter

import mlx.core as mx
import pytest

from app.engine.decoding import acceptance
from app.engine.decoding.loading import load_pair
from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
from app.engine.decoding.sampling import Sampler, SamplingParams
from app.engine.decoding.session import ChatSession
from tests.engine.helpers import drive

HOT = dict(temperature=1.0, top_k=3)
DRAWS = 1000
TOKENS = 3


@pytest.fixture(scope="module")
def fast_pair(toy_models, tmp_path_factory):
    """Main: the one-layer toy draft. Draft: the same with a noisy head (agrees often, not always)."""
    folder = tmp_path_factory.mktemp("perturbed") / "draft"
    shutil.copytree(toy_models.draft, folder)
    weights = mx.load(str(folder / "model.safetensors"))
    head = weights["lm_head.weight"]
    noise = mx.random.normal(head.shape, key=mx.random.key(1)) * 0.6 * mx.abs(head).mean()
    weights["lm_head.weight"] = head + noise.astype(head.dtype)
    mx.save_safetensors(str(folder / "model.safetensors"), weights)
    return load_pair(toy_models.draft, folder)


def _distribution(model, prompt: list[int], params: SamplingParams) -> dict[int, float]:
    logits = model(mx.array(prompt)[None])[:, -1, :]
    logprobs = Sampler(params).process(logits, None)[0]
    probs = mx.exp(logprobs)
    mx.eval(probs)
    return {i: p for i, p in enumerate(probs.tolist()) if p > 0}


def _exact_joint(pair, prompt, params) -> dict[tuple[int, ...], float]:
    joint = {(): 1.0}
    for _ in range(TOKENS):
        joint = {
            seq + (t,): p * pt
            for seq, p in joint.items()
            for t, pt in _distribution(pair.main.model, prompt + list(seq), params).items()
        }
    return joint


def _chi_square_p(observed: Counter, expected: dict, n: int) -> float:
    """Goodness of fit; cells expected below 5 are pooled. Wilson-Hilferty for the p-value."""
    stat, df, pool_o, pool_e = 0.0, -1, 0, 0.0
    for cell, p in expected.items():
        e = p * n
        if e < 5:
            pool_o, pool_e = pool_o + observed.get(cell, 0), pool_e + e
            continue
        stat += (observed.get(cell, 0) - e) ** 2 / e
        df += 1
    unexpected = n - sum(observed.get(c, 0) for c in expected)
    pool_o += unexpected
    if pool_e > 0 or pool_o:
        stat += (pool_o - pool_e) ** 2 / max(pool_e, 1e-9)
        df += 1
    z = ((stat / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))


def _sample(pair, prompt, policy_factory, rule: str, compiled: bool = False) -> tuple[Counter, Counter]:
    # compiled passes run over padded caches only
    session = ChatSession(pair, padded_keys=True, compiled_steps=True) if compiled else ChatSession(pair)
    assert (session.main_step is not None and session.draft_step is not None) == compiled
    counts: Counter = Counter()
    verdicts: Counter = Counter()
    for seed in range(DRAWS):
        out = drive(
            session,
            prompt,
            policy_factory(),
            max_tokens=TOKENS,
            stop_ids=[],
            sampling=SamplingParams(**HOT, seed=seed),
            acceptance=rule,
        )
        counts[tuple(out.ids)] += 1
        verdicts.update("accepted" if i < r.accepted else "rejected" for r in out.rounds for i in range(r.k))
    return counts, verdicts


@pytest.fixture(scope="module")
def setup(fast_pair, toy_prompt):
    params = SamplingParams(**HOT)
    p = _distribution(fast_pair.main.model, toy_prompt, params)
    q = _distribution(fast_pair.draft.model, toy_prompt, params)
    tv = 0.5 * sum(abs(p.get(t, 0) - q.get(t, 0)) for t in set(p) | set(q))
    assert 0.15 < tv < 0.9, f"the pair must disagree for the test to mean anything (TV {tv:.2f})"
    return fast_pair, toy_prompt, _exact_joint(fast_pair, toy_prompt, params)


# compiled passes compute the same logits (test_compiled_step) and answer as plain decoding does
# (test_cache_property); their sampling is checked again under -m heavy
@pytest.mark.parametrize(
    "compiled", [False, pytest.param(True, marks=pytest.mark.heavy)], ids=["eager", "compiled"]
)
def test_residual_speculation_samples_the_main_distribution(setup, compiled):
    pair, prompt, joint = setup
    counts, verdicts = _sample(pair, prompt, lambda: FixedDraftLength(2), "residual", compiled)
    assert min(verdicts["accepted"], verdicts["rejected"]) > DRAWS // 10, verdicts  # both paths ran
    p_value = _chi_square_p(counts, joint, DRAWS)
    print(f"residual p={p_value:.3g}")
    assert p_value > 1e-3


# a check of the statistical test's power, not of a path: the test above covers residual sampling
@pytest.mark.heavy
def test_always_accepting_fails_the_same_test(setup, monkeypatch):
    def always(p, q, proposed, sampler):
        _, draws = acceptance.residual(p, q, proposed, sampler)
        return mx.ones(proposed.shape, dtype=mx.bool_), draws

    monkeypatch.setitem(acceptance.RULES, "residual", always)
    pair, prompt, joint = setup
    counts, _ = _sample(pair, prompt, lambda: FixedDraftLength(2), "residual")
    p_value = _chi_square_p(counts, joint, DRAWS)
    print(f"always-accept p={p_value:.3g}")
    assert p_value < 1e-6


def test_residual_accepts_more_than_exact_matching(fast_pair, toy_prompt):
    rates = {}
    for rule in ("exact", "residual"):
        accepted = proposed = 0
        session = ChatSession(fast_pair)
        for seed in range(30):
            out = drive(
                session,
                toy_prompt,
                FixedDraftLength(3),
                max_tokens=12,
                stop_ids=[],
                sampling=SamplingParams(temperature=0.7, seed=seed),
                acceptance=rule,
            )
            assert out.offsets_ok
            accepted += out.finished.stats.accepted
            proposed += out.finished.stats.proposed
        rates[rule] = accepted / proposed
    assert rates["residual"] > 1.3 * rates["exact"], rates


def test_seeded_residual_sampling_is_reproducible_and_greedy_stays_exact(toy_pair, toy_prompt):
    hot = SamplingParams(temperature=0.8, top_p=0.95, seed=11)
    a = drive(ChatSession(toy_pair), toy_prompt, FixedDraftLength(3), sampling=hot, max_tokens=24)
    b = drive(ChatSession(toy_pair), toy_prompt, FixedDraftLength(3), sampling=hot, max_tokens=24)
    assert a.ids == b.ids, "the same seed gives the same answer"
    assert a.offsets_ok, "every round left the caches in step with the tokens"
    plain = drive(ChatSession(toy_pair), toy_prompt, PlainDecoding(), max_tokens=24)
    greedy = drive(
        ChatSession(toy_pair), toy_prompt, FixedDraftLength(3), max_tokens=24, acceptance="residual"
    )
    assert greedy.ids == plain.ids
    with pytest.raises(ValueError, match="unknown acceptance"):
        drive(ChatSession(toy_pair), toy_prompt, FixedDraftLength(3), acceptance="bogus")


def test_joint_cells_are_what_the_test_expects(setup):
    _, _, joint = setup
    assert abs(sum(joint.values()) - 1) < 1e-4, "the probabilities add up to 1"
    assert len(joint) == 3**TOKENS, "every answer of the length is counted"
    assert all(len(c) == TOKENS for c in itertools.islice(joint, 3))
