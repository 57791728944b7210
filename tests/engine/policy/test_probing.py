"""Probe spacing against what whole probes, catch-up read included, were measured to cost."""

from __future__ import annotations

from app.engine.decoding.events import Provenance
from app.engine.decoding.policy import DraftPlan
from app.engine.policy.confidence import ConfidenceLink
from app.engine.policy.config import DEFAULTS
from app.engine.policy.estimates import AcceptanceCounts
from app.engine.policy.probing import Prober, Standing

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
