"""The controller's acceptance estimates: per draft position, the chance a proposal passes given
that the ones before it did, from exponentially forgetting counts; and what they make a round
worth in tokens."""

from __future__ import annotations

from app.engine.decoding.policy import MAX_DRAFT


class AcceptanceCounts:
    """Discounted accept/trial counts per draft position."""

    def __init__(self, prior: float, weight: float, decay: float) -> None:
        self.prior, self.weight, self.decay = prior, weight, decay
        self.hits = [0.0] * MAX_DRAFT
        self.trials = [0.0] * MAX_DRAFT
        # bumped by every change: the controller reads the estimates every round and recomputes
        # them only when this moved (a bypassed draft's counts may sit still for many rounds)
        self.version = 0
        self._estimates: tuple[tuple[int, int], tuple[float, ...], tuple[float, ...]] = ((-1, 0), (), ())

    def _forget(self, weight: float) -> None:
        self.version += 1
        decay = self.decay**weight
        self.hits = [h * decay for h in self.hits]
        self.trials = [t * decay for t in self.trials]

    def add(self, k: int, accepted: int, weight: float = 1.0) -> None:
        """One round (`weight` < 1: a trial worth part of a round, forgetting that much less)."""
        self._forget(weight)
        for i in range(min(accepted + 1, k, MAX_DRAFT)):
            self.trials[i] += weight
            self.hits[i] += weight * (i < accepted)

    def add_predicted(self, open_rounds: list[float], p: float, weight: float, longest: int) -> None:
        """A token whose proposal would pass with chance `p`, counted at once (`weight`: a round's
        share) in every round of up to `longest` proposals the draft could have started by it.
        `open_rounds` holds those rounds' chance of having reached this token, oldest first; it
        is updated, and this token opens a round of its own.

        Summed over a window this is a whole round known in expectation, but nothing waits for
        the window: counting a round only once its `longest` tokens had all been written kept a
        bypassed draft's estimates still for the first `longest` tokens of every bypass, just when
        they should be moving."""
        self._forget(weight)
        open_rounds.append(1.0)
        depth = len(open_rounds)
        for i, reach in enumerate(open_rounds):
            position = depth - 1 - i
            self.trials[position] += weight * reach
            self.hits[position] += weight * reach * p
            open_rounds[i] = reach * p
        if depth >= min(longest, MAX_DRAFT):
            del open_rounds[0]

    def add_at(self, position: int, p: float, weight: float) -> None:
        """One more trial at `position` of the round just counted, known only in expectation."""
        if position < MAX_DRAFT:
            self.version += 1
            self.trials[position] += weight
            self.hits[position] += weight * p

    def restart_from(self, record: AcceptanceCounts, rounds: float) -> None:
        """Take `record`'s rates at the weight of `rounds` rounds (less if it has less)."""
        self.version += 1
        scale = min(1.0, rounds / record.trials[0]) if record.trials[0] else 0.0
        self.hits = [h * scale for h in record.hits]
        self.trials = [t * scale for t in record.trials]

    def restore(self, hits: list[float], trials: list[float]) -> None:
        """Take these counts instead (a saved state)."""
        self.version += 1
        self.hits, self.trials = list(hits), list(trials)

    def estimates(self, k: int) -> tuple[float, ...]:
        key = (self.version, k)
        if self._estimates[0] != key:
            out, prev = [], self.prior
            for i in range(k):
                prev = (self.hits[i] + self.weight * prev) / (self.trials[i] + self.weight)
                out.append(prev)
            self._estimates = (key, tuple(out), tuple(tokens_by_k(out)))
        return self._estimates[1]

    def optimistic_tokens(self, k: int, z: float) -> list[float]:
        """`tokens_by_k` of the estimates up to k, each raised by `z` of its standard error: what
        the text could still be worth by the evidence the counts hold."""
        rates = self.estimates(k)
        return tokens_by_k(
            [min(1.0, a + z * (a * (1.0 - a) / (t + self.weight)) ** 0.5) for a, t in zip(rates, self.trials)]
        )

    def tokens(self, k: int) -> tuple[float, ...]:
        """`tokens_by_k` of the estimates up to k."""
        self.estimates(k)
        return self._estimates[2]


def tokens_by_k(rates: list[float]) -> list[float]:
    """Expected tokens of a round drafting k = 0..len(rates): 1 (the main's own token) plus the
    expected run of accepted proposals."""
    tokens, run = [1.0], 1.0
    for a in rates:
        run *= a
        tokens.append(tokens[-1] + run)
    return tokens


def expected_tokens(rates: list[float]) -> float:
    """Expected tokens of a round drafting len(rates) tokens."""
    return tokens_by_k(rates)[-1]
