"""What the main's own confidence says about the draft: a free signal while the draft sits out.

A bypassed draft is judged only by probing it, and a probe pays for the draft reading every token
it skipped. On a CPU that reading costs a share of a main step per token, so a probe after a
long bypass costs several steps and no spacing keeps probes within budget. The main's top
probability at each token it emits costs nothing extra (the verify pass computed the row anyway),
and the draft tends to agree with the main where the main is sure (a small model of the same
family reads easy text as the large one does; docs/adaptive.md). So the link from the main's confidence to the draft's hit rate is learnt from
every token whose draft verdict is known (draft rounds and catch-up hindsight), and during a
bypass it turns the main's confidences into the hit rate the draft would be having now.
"""

from __future__ import annotations

from bisect import bisect_right

# bins of the main's top probability; where a draft's agreement changes fastest they are narrow
EDGES = (0.3, 0.5, 0.7, 0.85, 0.95, 0.99)
# what a bin with few verdicts borrows (ConfidenceLink.predict): the confidence it stands for
_CENTRES = tuple((lo + hi) / 2 for lo, hi in zip((0.0, *EDGES), (*EDGES, 1.0)))


def confidence_bin(confidence: float) -> int:
    return bisect_right(EDGES, confidence)


class ConfidenceLink:
    """Discounted draft hit counts per bin of the main's confidence.

    A bin with little data borrows (weight `prior`) from the confidence it stands for: a draft
    that reads the text as the main does picks the main's token about as often as the main is
    sure of it. Borrowing the overall rate instead let a draft met only on hard text (a poem,
    where few tokens were sure) be predicted at its poem rate on code the main was sure of,
    and stay bypassed through text it would have paid on. A draft that does not read
    the text so (a random-weight one) is soon judged in the bins the text fills, and its
    verdicts outweigh what they borrow. `informative` says whether the bins that hold data
    differ enough to be worth acting on.
    """

    def __init__(
        self, decay: float = 0.998, prior: float = 2.0, minimum_seen: float = 24.0, spread: float = 0.2
    ) -> None:
        self.decay, self.prior = decay, prior
        self.minimum_seen, self.spread = minimum_seen, spread
        self.hits = [0.0] * (len(EDGES) + 1)
        self.trials = [0.0] * (len(EDGES) + 1)
        self._rates: tuple[float, ...] | None = None  # read every round, changed only by learn
        self._informative: bool | None = None

    def learn(self, confidence: float, hit: bool, weight: float = 1.0) -> None:
        self._rates = self._informative = None
        decay = self.decay**weight
        self.hits = [h * decay for h in self.hits]
        self.trials = [t * decay for t in self.trials]
        b = confidence_bin(confidence)
        self.trials[b] += weight
        self.hits[b] += weight * hit

    def restore(self, hits: list[float], trials: list[float]) -> None:
        """Take these counts instead (a saved state)."""
        self.hits, self.trials = list(hits), list(trials)
        self._rates = self._informative = None

    @property
    def seen(self) -> float:
        return sum(self.trials)

    def predict(self, confidence: float) -> float:
        """The draft's chance of proposing the token the main was this sure of."""
        b = confidence_bin(confidence)
        return (self.hits[b] + self.prior * _CENTRES[b]) / (self.trials[b] + self.prior)

    def rates(self) -> tuple[float, ...]:
        """The predicted hit rate in each bin, lowest confidence first (for the telemetry)."""
        if self._rates is None:
            self._rates = tuple(
                round(self.predict(EDGES[b - 1] if b else 0.0), 3) for b in range(len(self.trials))
            )
        return self._rates

    def informative(self) -> bool:
        """Whether, after `minimum_seen` verdicts, the draft's rate differs by at least `spread`
        between bins that each hold a few: otherwise predictions would only pull a bypassed
        draft back to its usual rate, which a stretch it failed on had reason to doubt."""
        if self._informative is None:
            rates = [rate for rate, n in zip(self.rates(), self.trials) if n >= 3]
            self._informative = (
                self.seen >= self.minimum_seen and len(rates) >= 2 and max(rates) - min(rates) >= self.spread
            )
        return self._informative
