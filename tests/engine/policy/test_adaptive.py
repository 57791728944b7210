"""The adaptive controller: picks k from measured acceptance and costs, bypasses when it does not pay."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.engine.decoding.events import Provenance, RoundEvent
from app.engine.decoding.loading import ModelPair
from app.engine.decoding.policy import DraftPlan, PlainDecoding, RoundContext, as_plan
from app.engine.decoding.session import ChatSession
from app.engine.policy.adaptive import AdaptiveConfig, AdaptiveDraftLength
from app.engine.policy.costs import VerifyCosts
from app.engine.policy.estimates import expected_tokens
from tests.engine.helpers import drive

CONTEXT = RoundContext(has_draft=True, remaining=100, position=0)


class RecordingModel:
    """A model that records how many tokens each pass reads."""

    def __init__(self, model) -> None:
        self.model, self.widths = model, []

    def __call__(self, inputs, *args, **kwargs):
        self.widths.append(inputs.shape[1])
        return self.model(inputs, *args, **kwargs)

    def __getattr__(self, name: str):  # make_prompt_cache reads the layers
        return getattr(self.model, name)


def _event(
    k: int, accepted: int, verify: float, step: float = 0.001, source=Provenance.DRAFT, catch_up: int = 0
):
    return RoundEvent(
        index=0,
        k=k,
        proposed=(1,) * k,
        accepted=accepted,
        emitted=(1,) * (accepted + 1),
        draft_seconds=step * k,
        verify_seconds=verify,
        source=source if k else Provenance.MAIN,
        catch_up=catch_up,
    )


def _run(
    policy: AdaptiveDraftLength,
    rounds: int,
    accept_rate: float,
    verify,
    step: float = 0.001,
    context: RoundContext = CONTEXT,
) -> list[int]:
    """Simulate rounds where every proposal is accepted with the given chance (deterministically)."""
    ks, credit = [], 0.5
    for _ in range(rounds):
        plan = as_plan(policy.choose(context))
        accepted = 0
        for _ in range(plan.k):
            credit += accept_rate
            if credit < 1.0:
                break
            credit -= 1.0
            accepted += 1
        policy.observe(_event(plan.k, accepted, verify(plan.k + 1), step, plan.source))
        ks.append(plan.k)
    return ks


def test_expected_tokens_counts_the_run_of_accepted_proposals():
    assert expected_tokens([]) == 1.0
    assert expected_tokens([1.0, 1.0, 1.0]) == 4.0
    assert abs(expected_tokens([0.5, 0.5]) - 1.75) < 1e-12


def test_verify_costs_interpolate_between_sizes_and_are_optimistic_beyond():
    costs = VerifyCosts()
    for _ in range(8):
        costs.add(1, 0.010)
    for _ in range(3):
        costs.add(5, 0.050)
    table = costs.table(8)
    assert abs(table[0] - 0.010) < 1e-9 and abs(table[4] - 0.050) < 1e-9
    assert abs(table[2] - 0.030) < 1e-9  # between two measured sizes: on the line joining them
    assert abs(table[7] - 0.050) < 1e-9  # never measured above 5: priced as cheap as it could be
    costs.add(8, 0.056)  # a plateau, as on a many-core CPU: now measured, the measurement decides
    table = costs.table(8)
    assert abs(table[7] - 0.056) < 1e-9 and abs(table[5] - 0.052) < 1e-9
    costs.add(3, 0.060)  # a noisy size: costs never decrease with n
    assert costs.table(8) == sorted(costs.table(8))
    # a slower plain step moves every size with it, the table read again or not
    before = costs.table(8)
    for _ in range(9):
        costs.add(1, 0.020)
    assert costs.table(8) == pytest.approx([2 * x for x in before])


def test_a_first_pass_with_one_time_costs_is_held_until_a_second_confirms_it():
    costs = VerifyCosts()
    for _ in range(3):
        costs.add(1, 0.010)
        costs.add(2, 0.012)
    costs.add(4, 0.080)  # a new shape's first pass, with its kernels compiled (a GPU): 5x its cost
    assert costs.table(8)[3] == pytest.approx(0.016)  # priced on the other sizes' line meanwhile
    costs.add(4, 0.017)  # the second pass replaces it, where a median would keep half of it
    assert costs.table(8)[3] == pytest.approx(0.017)
    costs.add(4, 0.019)
    assert costs.table(8)[3] == pytest.approx(0.018)  # from then on the median of what was measured
    costs.add(6, 0.030)  # within twice the line: a real cost, taken as measured
    assert costs.table(8)[5] == pytest.approx(0.030)


def test_a_costly_first_pass_does_not_keep_a_good_draft_short():
    """The first answer's exploration at k = 3 paid one-time costs six times a pass; the draft,
    accepted throughout, must still grow to long drafts."""
    seen: set[int] = set()

    def verify(n: int) -> float:
        first = n not in seen
        seen.add(n)
        return (0.010 + 0.0005 * n) * (6 if first and n == 4 else 1)

    policy = AdaptiveDraftLength(use_lookup=False)
    ks = _run(policy, 40, accept_rate=1.0, verify=verify)
    assert ks[0] == 3 and min(ks[-10:]) >= 6, ks


def test_cheap_verify_and_good_draft_drafts_long():
    policy = AdaptiveDraftLength(use_lookup=False)
    ks = _run(policy, 40, accept_rate=0.95, verify=lambda n: 0.020 + 0.0005 * n)
    assert min(ks[-10:]) >= 5, ks
    snap = policy.snapshot()
    assert snap["bypassed"] is False and snap["k"] >= 5 and snap["source"] == "draft"
    assert snap["acceptance"]["draft"][0] > 0.8 and snap["verify_s"][1] > 0
    assert snap["expected_speedup"] > 1.5


def test_costly_verify_prefers_short_drafts():
    policy = AdaptiveDraftLength(use_lookup=False)
    ks = _run(policy, 40, accept_rate=0.6, verify=lambda n: 0.010 + 0.004 * n, step=0.0005)
    assert all(1 <= k <= 3 for k in ks[-10:]), ks


def test_a_useless_draft_is_bypassed_and_probed_rarely_within_budget():
    policy = AdaptiveDraftLength(use_lookup=False)
    verify = lambda n: 0.020 + 0.010 * (n - 1)
    ks = _run(policy, 400, accept_rate=0.0, verify=verify, step=0.002)
    probes = [i for i, k in enumerate(ks) if k and i > 3]  # after a plain step and two explorations
    assert ks[3:10] == [0] * 7 and policy.snapshot()["bypassed"] is True
    assert 1 <= len(probes) <= 12, probes
    assert min(b - a for a, b in zip(probes[1:], probes[2:])) > 50  # once the evidence is in
    wasted = sum(k * 0.002 + verify(k + 1) - verify(1) for k in ks[3:])
    assert wasted / (len(ks[3:]) * verify(1)) <= 0.03  # probes cost at most the budget


def test_bypass_ends_when_the_text_gets_predictable_again():
    policy = AdaptiveDraftLength(use_lookup=False)
    verify = lambda n: 0.020 + 0.002 * (n - 1)
    _run(policy, 60, accept_rate=0.0, verify=verify)
    assert policy.snapshot()["bypassed"] is True
    ks = _run(policy, 150, accept_rate=1.0, verify=verify)
    assert min(ks[-20:]) >= 4, ks


def test_lookup_is_chosen_when_it_beats_the_draft_model():
    policy = AdaptiveDraftLength()
    context = RoundContext(has_draft=True, remaining=100, position=0, lookup_len=6)
    verify = lambda n: 0.020 + 0.001 * n
    plans = []
    for _ in range(50):
        plan = as_plan(policy.choose(context))
        accepted = plan.k if plan.source is Provenance.LOOKUP else 0  # lookup is right, the draft wrong
        policy.observe(_event(plan.k, accepted, verify(plan.k + 1), 0.003, plan.source))
        plans.append(plan)
    last = plans[-10:]  # lookup at its longest, but for a neighbour check and a probe of the draft
    assert (
        sum(p.source is Provenance.LOOKUP for p in last) >= 9
        and last.count(DraftPlan(6, Provenance.LOOKUP)) >= 7
    ), plans


def test_greedy_adaptive_equals_plain_and_keeps_the_caches_consistent(toy_pair, toy_useless_pair, toy_prompt):
    for pair in (toy_pair, toy_useless_pair):
        plain = drive(ChatSession(pair), toy_prompt, PlainDecoding(), max_tokens=48, stop_ids=[])
        out = drive(ChatSession(pair), toy_prompt, AdaptiveDraftLength(), max_tokens=48, stop_ids=[])
        assert out.ids == plain.ids and out.offsets_ok
        snap = out.rounds[-1].policy
        assert {"k", "acceptance", "verify_s", "draft_s", "bypassed"} <= set(snap)


def test_bypass_runs_no_draft_passes_and_the_draft_catches_up_in_one_pass(toy_useless_pair, toy_prompt):
    class BypassThenResume(AdaptiveDraftLength):
        def choose(self, context):
            super().choose(context)  # telemetry as usual
            return as_plan(3 if context.position == 0 or context.position >= 20 else 0)

    draft = RecordingModel(toy_useless_pair.draft.model)
    pair = ModelPair(toy_useless_pair.main, replace(toy_useless_pair.draft, model=draft))
    session = ChatSession(pair)
    out = drive(session, toy_prompt, BypassThenResume(use_lookup=False), max_tokens=30, stop_ids=[])
    assert out.offsets_ok
    resumed = next(r for r in out.rounds[1:] if r.k)
    bypassed = out.rounds[1 : resumed.index]
    assert len(bypassed) >= 18 and all(r.k == 0 for r in bypassed)
    # every draft pass is the prompt's prefill or one of a draft round's k steps: none in between
    assert len(draft.widths) == 1 + sum(r.k for r in out.rounds)
    assert resumed.catch_up == len(bypassed)  # the skipped tokens, read in the first draft step
    first_step = 1 + sum(r.k for r in out.rounds[: resumed.index])
    assert draft.widths[first_step] == resumed.catch_up + 1  # with the round's pending token


def test_worker_settings_default_to_adaptive_and_offer_lookup():
    from app.engine.decoding.policy import FixedDraftLength
    from app.engine.protocol import SpeculationSettings

    assert isinstance(SpeculationSettings().policy(), AdaptiveDraftLength)
    lookup = SpeculationSettings(mode="lookup").policy()
    assert isinstance(lookup, AdaptiveDraftLength) and lookup.sources == [Provenance.LOOKUP]
    assert isinstance(SpeculationSettings(mode="fixed", k=3).policy(), FixedDraftLength)
    assert SpeculationSettings(acceptance="exact").acceptance == "exact"


def test_drafting_cost_is_priced_per_k_not_as_k_equal_steps():
    """Drafting has a fixed part (reading the backlog, the host sync): with draft(k) = 6 ms +
    0.8 ms·k and 90% acceptance the fastest fixed k is the longest; a per-step cost learnt at a
    short k would price k = 8 at three times its real cost and stop at 4."""
    policy = AdaptiveDraftLength(use_lookup=False)
    verify = lambda n: 0.010 + 0.0005 * n
    ks, credit = [], 0.5
    for _ in range(60):
        plan = as_plan(policy.choose(CONTEXT))
        accepted = 0
        for _ in range(plan.k):
            credit += 0.9
            if credit < 1.0:
                break
            credit -= 1.0
            accepted += 1
        event = _event(plan.k, accepted, verify(plan.k + 1))
        policy.observe(replace(event, draft_seconds=0.006 + 0.0008 * plan.k if plan.k else 0.0))
        ks.append(plan.k)
    assert min(ks[-10:]) >= 7, ks
    assert policy.snapshot()["draft_s"][1] > 0.006  # the fixed part is measured, not assumed


def test_lookup_is_scored_every_round_without_being_used():
    """While the draft model is bypassed, lookup's candidates are checked against what the main
    emitted; once they keep matching, lookup takes over with no probe ever spent on it."""
    policy = AdaptiveDraftLength()
    verify = lambda n: 0.020 + 0.001 * n
    text = list(range(100, 400))
    sources, pos = [], 0
    for _ in range(40):
        context = RoundContext(
            has_draft=True, remaining=200, position=pos, lookup_len=6, lookup=tuple(text[pos : pos + 6])
        )
        plan = as_plan(policy.choose(context))
        accepted = plan.k if plan.source is Provenance.LOOKUP else 0  # the text is what lookup says
        emitted = tuple(text[pos : pos + accepted + 1])
        event = RoundEvent(
            index=0,
            k=plan.k,
            proposed=tuple(text[pos : pos + plan.k]),
            accepted=accepted,
            emitted=emitted,
            draft_seconds=0.003 * plan.k,
            verify_seconds=verify(plan.k + 1),
            source=plan.source if plan.k else Provenance.MAIN,
        )
        policy.observe(event)
        sources.append(plan.source if plan.k else Provenance.MAIN)
        pos += len(emitted)
    assert Provenance.LOOKUP in sources[:12], sources
    assert sources[-10:].count(Provenance.LOOKUP) >= 9, sources  # a close-call draft may get a probe
    assert policy.snapshot()["acceptance"]["lookup"][0] > 0.8


def test_one_costly_burst_does_not_pin_k_low():
    """Verify passes over 3+ tokens cost 8x while another process held the machine; afterwards
    the neighbour checks re-measure them and k climbs to where the real costs put it."""
    policy = AdaptiveDraftLength(use_lookup=False)
    real = lambda n: 0.010 + 0.0005 * n
    _run(policy, 30, accept_rate=0.95, verify=lambda n: real(n) * (8 if n >= 3 else 1))
    assert policy.snapshot()["k"] <= 2
    ks = _run(policy, 200, accept_rate=0.95, verify=real)
    assert sorted(ks[-16:])[8] >= 5, ks


def test_costs_follow_the_machine_when_a_size_goes_unplayed():
    """The machine gets 2x faster while the draft is bypassed: verify(5) and drafting, measured
    only in the slow phase, are read back at the new speed, as multiples of the plain step."""
    policy = AdaptiveDraftLength(use_lookup=False)
    _run(policy, 30, accept_rate=0.0, verify=lambda n: 0.020 + 0.004 * n, step=0.002)
    before = policy.verify.table(5)[4]
    _run(policy, 30, accept_rate=0.0, verify=lambda n: (0.020 + 0.004 * n) / 2, step=0.001)
    assert abs(policy.verify.table(5)[4] / before - 0.5) < 0.05
    assert abs(policy.verify.measured()[1] - 0.012) < 1e-9


def test_a_new_answer_reconsiders_a_draft_bypassed_on_hard_text():
    """Hard text (5% acceptance) bypasses the draft; at the next answer (95%) the record of the
    last one weighs half, probes come back good, and drafting resumes within the answer."""
    policy = AdaptiveDraftLength(use_lookup=False)
    verify = lambda n: 0.010 + 0.001 * n
    _run(policy, 80, accept_rate=0.05, verify=verify, step=0.003)
    assert policy.snapshot()["bypassed"] is True
    policy.begin_answer()
    ks = _run(policy, 120, accept_rate=0.95, verify=verify, step=0.003)
    assert sum(k > 0 for k in ks[-40:]) >= 35, ks


def test_a_useless_draft_stays_bypassed_across_answers():
    policy = AdaptiveDraftLength(use_lookup=False)
    verify = lambda n: 0.020 + 0.010 * (n - 1)
    _run(policy, 60, accept_rate=0.0, verify=verify, step=0.002)
    ks = []
    for _ in range(5):
        policy.begin_answer()
        ks += _run(policy, 100, accept_rate=0.0, verify=verify, step=0.002)
    wasted = sum(k * 0.002 + verify(k + 1) - verify(1) for k in ks)
    assert wasted / (len(ks) * verify(1)) <= 0.03, ks  # probes stay within the budget


def test_lookup_is_scored_in_a_round_whose_plan_was_made_a_round_early():
    """A plain round may choose its successor ahead (choose_ahead); when that successor drafts
    with the model, lookup's candidates in it are still judged against what it emitted."""
    policy = AdaptiveDraftLength()
    policy._ahead = DraftPlan(2, Provenance.DRAFT)  # what choose_ahead keeps for the next round
    plan = as_plan(policy.choose(replace(CONTEXT, lookup_len=2, lookup=(5, 6))))
    assert plan == DraftPlan(2, Provenance.DRAFT)
    trials = sum(policy.acceptance[Provenance.LOOKUP].trials)
    event = replace(_event(2, 2, 0.02), emitted=(5, 6, 9))
    policy.observe(event)
    assert sum(policy.acceptance[Provenance.LOOKUP].trials) > trials  # both candidates matched


def test_unused_lookup_proposals_are_judged_at_every_depth():
    """Lookup's first token always matches, its second never: judged as the text is written,
    position 1 is learnt to fail, so lookup is never trusted with long drafts."""
    policy = AdaptiveDraftLength(use_draft=False)
    verify = lambda n: 0.010 + 0.004 * n
    text = list(range(1000, 1400))
    pos = 0
    for _ in range(60):
        guess = (text[pos], -1, -2, -3, -4, -5)  # right, then wrong
        plan = as_plan(policy.choose(RoundContext(True, 300, pos, 6, guess)))
        accepted = min(plan.k, 1) if plan.source is Provenance.LOOKUP else 0
        emitted = tuple(text[pos : pos + accepted + 1])
        policy.observe(
            RoundEvent(
                index=0,
                k=plan.k,
                proposed=guess[: plan.k],
                accepted=accepted,
                emitted=emitted,
                draft_seconds=0.0,
                verify_seconds=verify(plan.k + 1),
                source=plan.source if plan.k else Provenance.MAIN,
            )
        )
        pos += len(emitted)
    rates = policy.snapshot()["acceptance"]["lookup"]
    assert rates[0] > 0.8 and rates[1] < 0.5, rates  # judged at position 0 only, both read ~0.9
    assert policy.snapshot()["k"] <= 1


def test_the_draft_catch_up_judges_the_bypassed_stretch_in_hindsight(toy_pair, toy_useless_pair, toy_prompt):
    """After a bypass, the round that resumes the draft reports, for each skipped token of the
    answer, whether the draft (greedy, given the true text) would have proposed it."""
    import mlx.core as mx

    class BypassThenResume(AdaptiveDraftLength):
        def choose(self, context):
            super().choose(context)
            return as_plan(3 if context.position == 0 or context.position >= 20 else 0)

    verdicts = []
    for pair in (toy_pair, toy_useless_pair):
        out = drive(
            ChatSession(pair), toy_prompt, BypassThenResume(use_lookup=False), max_tokens=30, stop_ids=[]
        )
        resumed = next(r for r in out.rounds[1:] if r.k)
        answered = sum(len(r.emitted) for r in out.rounds[: resumed.index])
        assert len(resumed.hindsight) == min(resumed.catch_up, answered) >= 15
        text = toy_prompt + out.ids[:answered]
        predicted = mx.argmax(pair.draft.model(mx.array(text)[None])[0], axis=-1).tolist()
        start = len(text) - len(resumed.hindsight)
        expected = tuple(predicted[i - 1] == text[i] for i in range(start, len(text)))
        assert resumed.hindsight == expected
        verdicts.append(sum(expected) / len(expected))
    assert verdicts[0] > 0.8 > 0.2 > verdicts[1]  # the useful draft would have been right, the random one not


def test_a_probe_with_good_hindsight_resumes_the_draft():
    policy = AdaptiveDraftLength(use_lookup=False)
    verify = lambda n: 0.020 + 0.001 * (n - 1)
    _run(policy, 30, accept_rate=0.0, verify=verify, step=0.002)
    assert policy.snapshot()["bypassed"] is True
    before = policy.acceptance[Provenance.DRAFT].estimates(3)
    probe = replace(_event(2, 2, verify(3), 0.002), hindsight=(True,) * 40)  # text got predictable
    policy.observe(probe)
    after = policy.acceptance[Provenance.DRAFT].estimates(3)
    assert after[0] > 0.8 > before[0] and after[2] > 0.8
    plan = as_plan(policy.choose(CONTEXT))
    assert plan.source is Provenance.DRAFT and plan.k >= 3


def test_hindsight_counts_a_miss_where_the_run_of_hits_ends():
    policy = AdaptiveDraftLength(use_lookup=False)
    policy.observe(replace(_event(1, 0, 0.01), hindsight=(True, False) * 30))
    rates = policy.acceptance[Provenance.DRAFT].estimates(2)
    assert 0.3 < rates[0] < 0.7 and rates[1] < 0.3  # hit, miss, hit, miss: never two in a row


def test_a_close_call_is_probed_often_and_keeps_the_draft_ready():
    """A draft predicted just short of paying is re-checked every dozen rounds (text changes,
    and a probe's hindsight judges the whole stretch); a useless one stays within the budget
    and is not even prefilled with the prompt."""
    close = AdaptiveDraftLength(use_lookup=False)
    ks = _run(close, 120, accept_rate=0.3, verify=lambda n: 0.010 + 0.004 * (n - 1), step=0.0005)
    snap = close.snapshot()
    assert snap["bypassed"] and 0.85 <= max(snap["speedup_by_k"]["draft"]) < 1.03, snap
    probes = [i for i, k in enumerate(ks) if k and i >= 40]
    gaps = [b - a for a, b in zip(probes, probes[1:])]
    assert len(probes) >= 5 and all(8 <= g <= 12 for g in gaps), ks  # every 8-12 rounds
    assert close.wants_draft_prefill()

    useless = AdaptiveDraftLength(use_lookup=False)
    ks = _run(useless, 120, accept_rate=0.0, verify=lambda n: 0.010 + 0.006 * (n - 1), step=0.002)
    assert sum(1 for i, k in enumerate(ks) if k and i >= 40) <= 1, ks
    assert not useless.wants_draft_prefill()


def test_a_policy_can_ask_for_the_draft_to_read_the_prompt_while_starting_plain(toy_pair, toy_prompt):
    class PlainButReady(PlainDecoding):
        def wants_draft_prefill(self):
            return True

    ready, plain = ChatSession(toy_pair), ChatSession(toy_pair)
    drive(ready, toy_prompt, PlainButReady(), max_tokens=2, stop_ids=[])
    drive(plain, toy_prompt, PlainDecoding(), max_tokens=2, stop_ids=[])
    assert ready.draft_len == len(toy_prompt) - 1 and plain.draft_len == 0


def _run_reading(
    policy: AdaptiveDraftLength,
    rounds: int,
    hit: bool,
    verify,
    step: float,
    read: float,
    lag: int = 0,
    confidence: float | None = None,
) -> tuple[list[DraftPlan], float, int]:
    """Simulate rounds on a machine where the draft pays `read` seconds per skipped token it reads
    (a CPU): every proposal passes (`hit`) or none does; a draft round reports its catch-up and,
    for the tokens read, its hindsight. Returns the plans, the seconds beyond plain decoding that
    draft rounds cost, and the draft's lag at the end. With `confidence`, every token carries the
    main's confidence in it."""
    plans, wasted = [], 0.0
    for _ in range(rounds):
        plan = as_plan(policy.choose(CONTEXT))
        if plan.k:
            if plan.read_limit is not None:
                lag = min(lag, plan.read_limit)
            draft_s = step * plan.k + read * lag
            accepted = plan.k if hit else 0
            event = replace(
                _event(plan.k, accepted, verify(plan.k + 1), step),
                draft_seconds=draft_s,
                catch_up=lag,
                hindsight=(hit,) * lag,
            )
            wasted += draft_s + verify(plan.k + 1) - verify(1)
            lag = 1 if hit else 0
        else:
            event = _event(0, 0, verify(1))
            lag += 1
        if confidence is not None:
            event = replace(event, confidence=(confidence,) * len(event.emitted))
        policy.observe(event)
        plans.append(plan)
    return plans, wasted, lag


def test_where_reading_costs_a_share_of_a_step_a_bypassed_draft_is_still_probed_at_a_bounded_cost():
    """On a CPU a skipped token costs the draft a fifth of a main step to read, so probing after
    a long bypass would cost more than the 2% budget however far apart the probes were: a probe
    reads only the last tokens it can afford and skips the rest. The draft keeps being probed,
    within the budget, and comes back when the text turns predictable."""
    policy = AdaptiveDraftLength(use_lookup=False)
    verify = lambda n: 0.010 + 0.006 * (n - 1)
    plans, _, lag = _run_reading(policy, 80, hit=False, verify=verify, step=0.001, read=0.002)
    assert policy.snapshot()["bypassed"] is True and policy.catch_up_read.value >= 0.15
    plans, wasted, lag = _run_reading(policy, 1500, hit=False, verify=verify, step=0.001, read=0.002, lag=lag)
    probes = [p for p in plans if p.k]
    assert len(probes) >= 3, "a draft that reads at a cost must still be probed now and then"
    assert all(p.read_limit is not None and p.read_limit >= policy.probe_read for p in probes)
    assert wasted / (len(plans) * verify(1)) <= 0.03  # within the budget, reading included
    # never right so far, the draft keeps a share of the budget (see the test after next): its
    # first probe once the text turns may be a few hundred rounds away, and on this machine it
    # takes three probes' evidence to draft again
    plans, _, _ = _run_reading(policy, 1200, hit=True, verify=verify, step=0.001, read=0.002, lag=lag)
    assert sum(p.k > 0 for p in plans[-50:]) >= 45, "predictable text brings the draft back"


def test_where_reading_is_cheap_a_probe_reads_everything_it_skipped():
    policy = AdaptiveDraftLength(use_lookup=False)
    verify = lambda n: 0.010 + 0.0005 * (n - 1)
    plans, _, lag = _run_reading(policy, 80, hit=False, verify=verify, step=0.004, read=0.00001)
    plans, _, _ = _run_reading(policy, 600, hit=False, verify=verify, step=0.004, read=0.00001, lag=lag)
    probes = [p for p in plans if p.k]
    assert probes and all(p.read_limit is None for p in probes)


def _probe_gaps(plans: list[DraftPlan]) -> list[int]:
    probes = [i for i, p in enumerate(plans) if p.k]
    return [b - a for a, b in zip(probes, probes[1:])]


def test_a_draft_never_right_is_probed_ever_more_rarely_until_it_is():
    """A random-weight draft is right on nothing it proposes: its probes thin out as the misses
    pile up (where the full budget would probe every dozen rounds for ever), and predictable
    text still brings it back. A draft with a record of hits keeps its full budget."""
    verify = lambda n: 0.010 + 0.0005 * (n - 1)
    useless = AdaptiveDraftLength(use_lookup=False)
    plans, wasted, lag = _run_reading(useless, 4000, hit=False, verify=verify, step=0.001, read=0.00002)
    gaps = _probe_gaps(plans)
    assert max(gaps[2:5]) <= 20 and min(gaps[-3:]) >= 500, gaps
    assert wasted / (len(plans) * verify(1)) <= 0.005
    assert useless.snapshot()["draft_rarely_right"] is True  # the window asks for another draft
    plans, _, _ = _run_reading(useless, 600, hit=True, verify=verify, step=0.001, read=0.00002, lag=lag)
    assert next(i for i, p in enumerate(plans) if p.k) <= 520 and all(p.k for p in plans[-50:])

    proven = AdaptiveDraftLength(use_lookup=False)
    plans, _, lag = _run_reading(proven, 40, hit=True, verify=verify, step=0.001, read=0.00002)
    plans, _, _ = _run_reading(proven, 4000, hit=False, verify=verify, step=0.001, read=0.00002, lag=lag)
    assert max(_probe_gaps(plans)[-20:]) <= 20  # it paid once: every stretch may be one where it pays again
    assert proven.snapshot()["draft_rarely_right"] is False


def test_a_first_long_probe_reads_a_window_until_reading_is_priced():
    """A draft that paid from the start never read a skipped stretch, so what reading costs is
    unknown when hard text (the main unsure, as the link knows) first bypasses it: that probe
    reads only the last `probe_read` tokens (on a CPU, reading all of a long stretch once cost 8%
    of an answer), which prices reading; where it proves cheap, later probes read all they skipped."""
    policy = AdaptiveDraftLength(AdaptiveConfig(probe_read=4), use_lookup=False)
    for c, hit in [(0.99, True), (0.3, False)] * 30:
        policy.link.learn(c, hit)
    verify = lambda n: 0.010 + 0.006 * (n - 1)
    plans, _, lag = _run_reading(
        policy, 40, hit=True, verify=verify, step=0.001, read=0.00001, confidence=0.99
    )
    assert all(p.k for p in plans[3:]) and not policy.catch_up_read.count  # never behind by more than one
    plans, _, _ = _run_reading(
        policy, 1200, hit=False, verify=verify, step=0.001, read=0.00001, lag=lag, confidence=0.3
    )
    probes = [(i, p) for i, p in enumerate(plans) if p.k and i > 10]  # past the misses that end drafting
    assert len(probes) >= 2, plans
    (first_i, first), drafted = probes[0], max(i for i, p in enumerate(plans[:10]) if p.k)
    assert first_i - drafted > 3 * policy.probe_read  # a long stretch, read through a window
    assert first.read_limit == policy.probe_read
    assert policy.catch_up_read.count and all(p.read_limit is None for _, p in probes[1:])


def test_hindsight_teaches_the_link_only_where_the_confidence_was_computed():
    """Rounds that skipped the main's confidence still hold their tokens' places, so a probe's
    hindsight pairs each skipped token's verdict with that token's own confidence."""
    policy = AdaptiveDraftLength(use_lookup=False)
    sure = [0.99, 0.2, 0.99, 0.2]
    for c in sure:  # bypassed rounds that computed the confidence
        policy.observe(replace(_event(0, 0, 0.01), confidence=(c,)))
    for _ in range(3):  # and three that did not
        policy.observe(_event(0, 0, 0.01))
    # the draft would have hit where the main was sure, missed elsewhere, and on the last three
    hits = tuple(c > 0.5 for c in sure) + (False,) * 3
    policy.observe(replace(_event(1, 0, 0.01, catch_up=len(hits)), hindsight=hits))
    link = policy.link
    assert link.seen == pytest.approx(len(sure), rel=0.01)  # only the tokens with a known confidence
    assert link.predict(0.99) > 0.6 > 0.4 > link.predict(0.2)


@pytest.mark.parametrize("link", ["silent", "informative"])
def test_a_draft_that_clearly_does_not_pay_is_reconsidered_only_when_something_can_change(link):
    """While bypassed with the draft predicted well short of paying, nothing moves its estimates
    until a probe unless the main's confidence predicts its hits (an informative link): then the
    full choice is made every fourth round, else only once a probe has been. Probes come as
    before, and a lookup candidate is weighed at once."""
    policy = AdaptiveDraftLength()
    if link == "informative":
        for c, hit in [(0.99, True), (0.3, False)] * 30:
            policy.link.learn(c, hit)
    verify = lambda n: 0.020 + 0.010 * (n - 1)
    whys = []
    for _ in range(300):
        plan = as_plan(policy.choose(CONTEXT))
        whys.append(policy.snapshot()["why"])
        policy.observe(_event(plan.k, 0, verify(plan.k + 1), 0.002, plan.source))
    settled = whys[20:]
    share = settled.count("coasting") / len(settled)
    assert (0.6 <= share <= 0.8) if link == "informative" else share >= 0.9, whys
    assert "probe" in settled
    policy.choose(replace(CONTEXT, lookup_len=3, lookup=(7, 8, 9)))
    assert policy.snapshot()["why"] != "coasting"


def test_a_bypassed_draft_comes_back_soon_after_the_main_turns_sure():
    """While the draft sits out, each token the main is sure of counts at once as the likely hit
    of every round the draft could have had over it: the estimates move from the first such
    token, and the draft is back within a few rounds' choices (counting each round once its
    eight tokens were all seen, it took 20 plain rounds here)."""
    policy = AdaptiveDraftLength(use_lookup=False)
    for c, hit in [(0.99, True), (0.3, False)] * 30:
        policy.link.learn(c, hit)
    verify = lambda n: 0.020 + 0.010 * (n - 1)

    def round_(k: int, source: Provenance, confidence: float) -> None:
        policy.observe(replace(_event(k, 0, verify(k + 1), 0.002, source), confidence=(confidence,)))

    for _ in range(100):  # hard text: the main unsure, the draft missing
        plan = as_plan(policy.choose(CONTEXT))
        round_(plan.k, plan.source, 0.3)
    assert policy.snapshot()["bypassed"] is True
    before = policy.acceptance[Provenance.DRAFT].estimates(4)
    round_(0, Provenance.MAIN, 0.99)
    assert policy.acceptance[Provenance.DRAFT].estimates(4)[0] > before[0]
    for waited in range(1, 40):
        if as_plan(policy.choose(CONTEXT)).k:
            break
        round_(0, Provenance.MAIN, 0.99)
    assert waited <= 16


def test_confidence_is_asked_for_in_draft_rounds_and_while_the_link_can_use_it():
    policy = AdaptiveDraftLength(use_lookup=False)
    plan = as_plan(policy.choose(CONTEXT))
    assert plan.k and policy.wants_confidence  # a draft round: its verdicts teach the link
    policy.observe(replace(_event(plan.k, 0, 0.03), confidence=(0.9,)))
    for c, hit in [(0.95, False), (0.3, False)] * 30:  # misses whatever the main's confidence
        policy.link.learn(c, hit)
    policy._plan = DraftPlan(0, Provenance.MAIN)
    assert not policy.link.informative() and not policy.wants_confidence  # bypassed: nothing to learn
    for c, hit in [(0.99, True), (0.3, False)] * 30:  # now the confidence tells hits from misses
        policy.link.learn(c, hit)
    assert policy.link.informative() and policy.wants_confidence
    assert not AdaptiveDraftLength(use_draft=False).wants_confidence  # lookup alone: never


def test_a_draft_played_at_its_longest_teaches_a_settled_link_one_round_in_four():
    """The confidence is a reduction over every scored row, paid in every round that asks for it:
    once the link has seen enough, rounds at the longest draft ask in one round of four, while
    shorter drafts still ask every round (their last token prices the position beyond)."""
    policy = AdaptiveDraftLength(use_lookup=False)
    asked = {}
    for i in range(200):
        plan = as_plan(policy.choose(CONTEXT))
        asked.setdefault(plan.k, []).append(policy.wants_confidence)
        sure = (0.99,) * (plan.k + 1)
        policy.observe(replace(_event(plan.k, plan.k, 0.010 + 0.0002 * plan.k, 0.0002), confidence=sure))
    settled = asked[policy.max_k][-100:]
    assert policy.link.seen >= 2 * policy.link.minimum_seen
    assert 0.2 <= sum(settled) / len(settled) <= 0.32  # a quarter (neighbour rounds shift the count)
    assert all(want for k, wants in asked.items() if 0 < k < policy.max_k for want in wants)


def test_a_learning_link_asks_for_the_confidence_only_where_a_coming_probe_will_judge_it():
    """A useless draft sits out for hundreds of rounds between probes; its link learns only from
    a probe's hindsight, so only the rounds shortly before a probe need the main's confidence."""
    policy = AdaptiveDraftLength(use_lookup=False)
    verify = lambda n: 0.020 + 0.050 * (n - 1)
    asked = []
    for _ in range(1200):
        plan = as_plan(policy.choose(CONTEXT))
        asked.append(
            (plan.k, policy.wants_confidence, policy.since_used[Provenance.DRAFT], policy.prober.due)
        )
        policy.observe(_event(plan.k, 0, verify(plan.k + 1), 0.002, plan.source))
    bypassed = [(want, due - since) for k, want, since, due in asked[20:] if not k]
    assert not policy.link.informative() and policy.link.seen < 2 * policy.link.minimum_seen
    assert all(want == (left <= policy.confidence_lead) for want, left in bypassed)
    assert 0 < sum(want for want, _ in bypassed) < len(bypassed) / 4  # the probes' run-ups only
    assert all(want for k, want, _, _ in asked if k)  # draft rounds always


def test_coasting_ends_when_plain_decoding_gets_dearer():
    """A bypassed draft is priced against plain steps as the loop plays them (queued). When those
    slow down (the machine, a longer context), a draft that lost may pay: the full choice is made
    again as soon as the price of plain moves, not at the next probe."""
    policy = AdaptiveDraftLength(use_lookup=False)
    verify = lambda n: 0.020 + 0.030 * (n - 1)
    queued, slower, whys, ks = 0.020, 1.0, [], []
    for i in range(400):
        if i == 200:
            queued, slower = 0.040, 2.0  # plain decoding now costs twice what it did
        plan = as_plan(policy.choose(CONTEXT))
        whys.append(policy.snapshot()["why"])
        ks.append(plan.k)
        if plan.k:  # the draft is always right: only the costs keep it out
            policy.observe(_event(plan.k, plan.k, verify(plan.k + 1), 0.0005, plan.source))
        else:  # queued after the first rounds, but one step in 64 timed alone
            alone = i < 40 or i % 64 == 0
            policy.observe(
                replace(_event(0, 0, slower * verify(1) if alone else queued), overlapped=not alone)
            )
    assert whys[100:200].count("coasting") >= 90 and sum(k > 0 for k in ks[100:200]) <= 2  # a probe
    first = next(i for i in range(200, 400) if ks[i])  # the first draft round after the change
    # five stretches of eight queued steps must all say so (a host's stall bursts say it in two or
    # three), so the first can come a stretch after the fifth
    assert first - 200 <= 48 and whys[first] == "model", whys[200 : first + 1]
    assert sum(ks[300:]) >= 50  # and speculation pays from then on
