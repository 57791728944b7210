"""The link from the main's confidence to the draft's hit rate, and the controller reading it
while the draft sits out."""

from __future__ import annotations

import random

from app.engine.decoding.events import Provenance
from app.engine.measure.replay import CostModel, SimulatedClock, Trace, replay, run_policies
from app.engine.policy.adaptive import AdaptiveDraftLength
from app.engine.policy.confidence import ConfidenceLink

COMPUTE, BANDWIDTH = CostModel.shaped("compute"), CostModel.shaped("bandwidth")
SURE, UNSURE = 0.995, 0.4


def test_the_link_learns_that_the_draft_agrees_where_the_main_is_sure():
    link = ConfidenceLink()
    assert not link.informative()  # nothing learnt: no opinion
    for i in range(60):
        link.learn(SURE, hit=i % 20 != 0)  # 95%
        link.learn(UNSURE, hit=i % 5 == 0)  # 20%
    assert link.predict(SURE) > 0.9 and link.predict(UNSURE) < 0.3
    assert link.informative()


def test_a_link_that_cannot_tell_hits_from_misses_is_not_informative():
    link = ConfidenceLink()
    for i in range(200):
        link.learn((0.2, 0.6, 0.9, 0.999)[i % 4], hit=(i // 4) % 2 == 0)  # half, whatever the main says
    assert link.seen > 100
    assert not link.informative()
    assert abs(link.predict(0.999) - link.predict(0.2)) < 0.1


def _trace(pattern: str, seed: int) -> Trace:
    """'1': the draft is right and the main sure; '0': the draft is wrong and the main unsure
    (distinct tokens, so prompt lookup finds nothing)."""
    rng = random.Random(seed)
    answer = tuple(rng.sample(range(1000, 100_000), len(pattern)))
    hits = tuple(c == "1" for c in pattern)
    return Trace((1, 2, 3), answer, hits, f"t{seed}", tuple(SURE if h else UNSURE for h in hits))


def _without_confidence(trace: Trace) -> Trace:
    return Trace(trace.prompt, trace.answer, trace.draft_hits, trace.label)


def test_a_draft_bypassed_over_a_hard_stretch_comes_back_when_the_main_grows_sure():
    """On a CPU-like machine, where reading the skipped text costs more than any probe budget,
    the only way back for a draft bypassed over a hard stretch used to be a blind probe. With the
    main's confidence the controller sees the easy text resume and drafts again: each answer with
    a hard opening is faster than without that signal, and than the best fixed k."""
    rng = random.Random(3)
    easy = lambda n: "".join("1" if rng.random() < 0.97 else "0" for _ in range(n))
    hard = lambda n: "".join("1" if rng.random() < 0.15 else "0" for _ in range(n))
    warm = [_trace(easy(80), seed=i) for i in range(2)]  # the link learns here
    tests = [_trace(hard(30) + easy(90), seed=10 + i) for i in range(4)]
    clock = SimulatedClock()
    policy = AdaptiveDraftLength(use_lookup=False, clock=clock)
    for trace in warm:
        replay(trace, policy, COMPUTE, clock=clock)
    for trace in tests:
        result = replay(trace, policy, COMPUTE, clock=clock)
        assert result.plans[("main", 0)] >= 30  # bypassed over the hard stretch
        assert result.accepted >= 40  # and drafting again over the 90 easy tokens
    assert policy.link.informative()
    seconds = {}
    for name, chosen in (("with", warm + tests), ("without", [_without_confidence(t) for t in warm + tests])):
        seconds[name] = run_policies(
            chosen, COMPUTE.with_noise(0.1), (1, 2, 3, 4), adaptive={"adaptive": {"use_lookup": False}}
        )
    results = seconds["with"]
    for i in range(len(warm), len(warm) + len(tests)):
        assert results["adaptive"][i].seconds < seconds["without"]["adaptive"][i].seconds
        best = min(results[f"fixed{k}"][i].seconds for k in (1, 2, 3, 4))
        assert results["adaptive"][i].seconds <= best
        assert results["adaptive"][i].tokens_per_second >= 1.03 * results["plain"][i].tokens_per_second


def test_no_blind_probes_where_the_main_says_the_text_is_still_hard():
    """After answers where the draft paid, answers it cannot help with: without the main's
    confidence the controller probes blindly (its long-run record says the draft pays), and each
    probe pays for reading the whole bypassed stretch; with it, it stays bypassed."""
    rng = random.Random(5)
    good = ["".join("1" if rng.random() < 0.95 else "0" for _ in range(80)) for _ in range(2)]
    bad = ["".join("1" if rng.random() < 0.3 else "0" for _ in range(100)) for _ in range(3)]
    traces = [_trace(p, seed=i) for i, p in enumerate(good + bad)]
    speeds = {}
    for name, chosen in (("with", traces), ("without", [_without_confidence(t) for t in traces])):
        results = run_policies(chosen, COMPUTE, (2,), adaptive={"adaptive": {"use_lookup": False}})
        speeds[name] = [
            a.tokens_per_second / p.tokens_per_second
            for a, p in zip(results["adaptive"][2:], results["plain"][2:])
        ]
    # the first hard answer starts from a record that says the draft pays, with or without
    assert speeds["with"][0] >= speeds["without"][0] + 0.04, speeds  # the blind probes it avoids
    assert min(speeds["with"][1:]) >= 0.97, speeds


def test_a_fully_accepted_round_teaches_the_next_position_from_the_main_confidence():
    policy = AdaptiveDraftLength(use_lookup=False, clock=SimulatedClock())
    for i in range(40):  # teach the link: sure -> hit, unsure -> miss
        policy.link.learn(SURE, True)
        policy.link.learn(UNSURE, i % 10 == 0)
    before = policy.acceptance[Provenance.DRAFT].trials[1]
    from app.engine.decoding.events import RoundEvent

    policy.observe(
        RoundEvent(
            index=0,
            k=1,
            proposed=(7,),
            accepted=1,
            emitted=(7, 8),
            draft_seconds=0.001,
            verify_seconds=0.01,
            source=Provenance.DRAFT,
            confidence=(SURE, SURE),
        )
    )
    counts = policy.acceptance[Provenance.DRAFT]
    assert counts.trials[1] > before  # position 1 was never played, yet it has a trial now
    assert counts.hits[1] / counts.trials[1] > 0.8


def test_a_sure_main_is_read_as_a_likely_hit_before_the_link_has_seen_one():
    """A link learnt on unsure tokens alone says nothing about sure ones: it borrows the main's
    own confidence there rather than the draft's rate on hard text."""
    link = ConfidenceLink()
    for i in range(40):
        link.learn(UNSURE, hit=i % 5 < 2)  # 40% where the main gave 0.4
    assert abs(link.predict(UNSURE) - 0.4) < 0.05
    assert link.predict(SURE) > 0.9


def test_a_draft_met_only_on_hard_text_drafts_on_the_first_easy_answer():
    """The draft's first answers are hard (it is right on half the tokens, where the main is
    middling, and wrong where the main is unsure): it is bypassed, with few verdicts behind
    that. It is probed until the main's confidence can judge it, so when an answer comes that
    the main is sure of, the draft is called back within it. It used to sit out the whole
    code answer that followed two creative ones on the real pair (1.00x plain; 1.25x after
    any other answer). Here it drafts at 1.4-1.6x plain, where it reached 1.13-1.28x before."""
    rng = random.Random(11)
    hard = []
    for i in range(2):
        hits = [rng.random() < 0.5 for _ in range(64)]
        answer = tuple(rng.sample(range(1000, 100_000), 64))
        hard.append(Trace((1, 2, 3), answer, tuple(hits), f"hard{i}", tuple(0.6 if h else 0.4 for h in hits)))
    easy = _trace("1" * 96, seed=20)
    speeds = []
    for seed in range(6):
        results = run_policies(
            [*hard, easy],
            COMPUTE.with_noise(0.1),
            (2,),
            seed=seed,
            adaptive={"adaptive": {"use_lookup": False}},
        )
        speeds.append(results["adaptive"][2].tokens_per_second / results["plain"][2].tokens_per_second)
    assert min(speeds) >= 1.35, speeds
