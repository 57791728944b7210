"""When a draft the controller chose to play falls just under the margin, whether it plays on.

Leaving is sticky: a bypassed draft's estimates move only at the next probe, dozens of rounds
away, while another draft round is what tests them. On a 14B pair whose draft paid by 10-20%,
two rounds that failed early kept it out for 41% of its rounds (docs/adaptive.md). So a draft
chosen by the model plays on while its estimates, raised by `stay_z` standard errors, still
say it pays, for `stay_rounds` rounds at most: a draft that really stopped paying leaves a few
rounds later, one that met bad luck is not set aside for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.decoding.events import Provenance
from app.engine.decoding.policy import DraftPlan
from app.engine.policy.config import AdaptiveConfig
from app.engine.policy.costs import speedups
from app.engine.policy.estimates import AcceptanceCounts

CHOSEN = ("model", "neighbour", "stay")  # the reasons a draft round was played by choice


class StayRule:
    """Counts the rounds a draft has played on under the margin; `plan` says whether it plays one more."""

    def __init__(self, config: AdaptiveConfig) -> None:
        self.config = config
        self.stayed = 0  # rounds in a row played on under the margin

    def plan(
        self,
        best: DraftPlan,
        last: tuple[DraftPlan, object],
        up: int,
        acceptance: AcceptanceCounts,
        prices: tuple[float, float, Sequence[float], Sequence[float]],
        point: Sequence[float],
    ) -> DraftPlan | None:
        """The draft round to play instead of bypassing, or None (and the count starts again).
        `best` is the choice's own plan (the rule acts only where that is plain), `last` the
        round just played and why; `up` the longest draft playable now; `prices` plain per
        token, the overhead, drafting and verify prices, as `speedups` takes them; `point` the
        choice's speedups by k, of which the best is played."""
        played, why = last
        chosen = played.k and played.source is Provenance.DRAFT and why in CHOSEN
        if best.k or not up or not chosen or self.stayed >= self.config.stay_rounds:
            self.stayed = 0
            return None
        plain, overhead, draft, costs = prices
        hopeful = acceptance.optimistic_tokens(up, self.config.stay_z)
        if max(speedups(hopeful, plain, overhead, draft, costs, up)) <= self.config.margin:
            self.stayed = 0
            return None
        self.stayed += 1
        k = max(range(1, up + 1), key=lambda k: point[k - 1])
        return DraftPlan(min(k, self.config.stay_k), Provenance.DRAFT)
