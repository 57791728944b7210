"""Probe spacing against what whole probes, catch-up read included, were measured to cost."""

from __future__ import annotations

from dataclasses import replace

from app.engine.decoding.events import Provenance
from app.engine.decoding.policy import DraftPlan
from app.engine.policy.confidence import ConfidenceLink
from app.engine.policy.config import DEFAULTS
from app.engine.policy.estimates import AcceptanceCounts
from app.engine.policy.probing import HOPELESS_EVERY, Prober, Standing, by_line_above

DRAFT, MAIN = Provenance.DRAFT, Provenance.MAIN


def _standing(since: int) -> Standing:
    """A bypassed draft on a 4-bit GPU's shape, in plain steps: a pass over n tokens 1 + 0.67
    (n - 1), a draft step 0.8, a skipped token read 0.2; no record that says it pays."""
    costs = [0.0] + [1.0 + 0.67 * (n - 1) for n in range(1, 10)]
    return Standing(
        sources=[DRAFT],
        available={DRAFT: 8},
        played={DRAFT: 10},
        since_used={DRAFT: since},
        best_speedup={DRAFT: 0.5},
        link=ConfidenceLink(),
        record=AcceptanceCounts(0.5, 1.0, 0.995),
        overhead=0.0,
        costs=costs,
        drafting={DRAFT: [0.8 * k for k in range(9)]},
        plain=1.0,
        read_rate=0.2,
    )


def _due(prober: Prober) -> int:
    """The fewest bypassed rounds after which the prober asks for a probe."""
    for since in range(1, 5000):
        if prober.probe(DraftPlan(0, MAIN), _standing(since)) is not None:
            return since
    raise AssertionError("never probed")


def test_probes_measured_dear_come_no_closer_than_their_cost_affords():
    """Priced by its model (passes and a 16-token window at the per-token read rate: ~6 steps),
    a probe fits the 2% budget every ~300 rounds. Probes measured at 20 plain steps (a 4-bit
    draft's reads, split into pass sizes that each cost a pass) come a thousand rounds apart,
    beyond the 512-round cap, which holds only for probes that cost less."""
    modelled = _due(Prober(DEFAULTS))
    assert 250 <= modelled <= 400, modelled
    dear = Prober(DEFAULTS)
    for _ in range(3):
        dear.paid.add(20.0)
    assert _due(dear) == 1000  # 20 steps / 0.02 of a step per round
    for _ in range(5):
        dear.paid.add(2.0)  # cheap as measured: the model's spacing again
    assert _due(dear) == modelled


def _h100_standing(verified_up_to: int) -> Standing:
    """The controller's prices at a blind probe on an H100 (7B 4-bit main, 0.5B draft right on
    90%, MLX CUDA): verify passes measured over 1-4 tokens, larger sizes priced as 4 tokens."""
    ms = 1e-3
    measured = [8.208, 14.004, 17.991, 23.182]
    record = AcceptanceCounts(0.5, 1.0, 0.995)
    record.restore([90.0] * 8, [100.0] * 8)
    return Standing(
        sources=[DRAFT],
        available={DRAFT: 8},
        played={DRAFT: 4},
        since_used={DRAFT: 817},
        best_speedup={DRAFT: 0.8},
        link=ConfidenceLink(),
        record=record,
        overhead=0.45 * ms,
        costs=[0.0] + [c * ms for c in measured] + [measured[-1] * ms] * 5,
        drafting={DRAFT: [3.611 * ms * k for k in range(9)]},
        plain=5.811 * ms,
        read_rate=0.126,
        verified_up_to=verified_up_to,
    )


def _h100_prober(fruitless: int) -> Prober:
    """A prober after three probes measured on the H100 (32.8 ms beyond plain, 94.2 ms with
    their catch-up reads)."""
    prober = Prober(DEFAULTS)
    prober.fruitless = fruitless
    for _ in range(3):
        prober.extra.add(32.8e-3)
        prober.paid.add(94.2e-3)
    return prober


def test_a_record_that_pays_only_at_verify_sizes_never_measured_buys_no_full_reads():
    """Seen on an H100: by its record the draft paid only at k = 6-8 (1.02-1.07x), whose verify
    passes were priced as one of 4 tokens because none was ever played, and against plain steps
    timed alone rather than queued as a bypass plays them; so probes read all the draft skipped
    (56-77 tokens, 84-104 ms against 5.8 ms plain steps) once per answer. Priced as the choice
    prices plain, with the measured sizes' line above them, the record says the draft does not
    pay, and the probe reads a window."""
    at = _h100_standing(4)
    assert (
        Prober._best_speedup(
            at, by_line_above(at.costs, at.verified_up_to), 8, at.drafting[DRAFT], at.record.tokens(8)
        )
        < 0.75
    )
    plan = _h100_prober(fruitless=0).probe(DraftPlan(0, MAIN), at)
    assert plan is not None and plan.read_limit is not None


def test_verify_sizes_above_the_measured_are_priced_along_the_line():
    assert by_line_above([0.0, 1.0, 1.5, 2.0, 2.0, 2.0], 3) == [0.0, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert by_line_above([0.0, 1.0, 1.5, 2.0, 9.0, 2.0], 3)[4] == 9.0  # never below the table
    assert by_line_above([0.0, 1.0, 1.5, 2.0], 0) == [0.0, 1.0, 1.5, 2.0]  # nothing known: as is


def _due_at(prober: Prober, at: Standing) -> tuple[int, DraftPlan]:
    for since in range(1, 5000):
        plan = prober.probe(DraftPlan(0, MAIN), replace(at, since_used={DRAFT: since}))
        if plan is not None:
            return since, plan
    raise AssertionError("never probed")


def test_a_draft_that_could_not_pay_if_always_right_is_probed_every_4096_rounds():
    """On the H100's prices even a draft right on every token would not beat plain (0.66x at
    best): once a probe right on all it proposed has left it out, only a price that moves can
    change that, and it is probed every 4096 rounds, reading a window. Before that probe (a
    stall may have priced it; the recheck after a good probe replays such prices) it is probed
    as any draft."""
    at = _h100_standing(4)
    assert (
        Prober._best_speedup(
            at, by_line_above(at.costs, at.verified_up_to), 8, at.drafting[DRAFT], range(1, 10)
        )
        < DEFAULTS.margin
    )
    since, plan = _due_at(_h100_prober(fruitless=1), at)
    assert since == HOPELESS_EVERY and plan.read_limit == DEFAULTS.probe_read
    since, _ = _due_at(_h100_prober(fruitless=0), at)
    assert since < 1024
