"""The adaptive controller's settings: fixed for the controller's life, apart from its state."""

from __future__ import annotations

from dataclasses import dataclass

MAX_K = 8  # the longest draft the controller plays unless told otherwise


@dataclass(frozen=True, slots=True)
class AdaptiveConfig:
    """How the controller explores, probes and weighs what it learns (docs/adaptive.md)."""

    max_k: int = MAX_K
    first_k: int = 3  # the first draft's length, before anything is known
    explore_rounds: int = 2  # draft rounds a fresh draft plays before its costs are modelled
    # a bypassed source is probed with `probe_k` tokens, within `probe_budget` of plain decoding
    # time, reading at least the last `probe_read` tokens it skipped
    probe_k: int = 2
    probe_budget: float = 0.02
    probe_read: int = 16
    # a bypassed source predicted within `close_call` of plain is probed every
    # `close_probe_every` rounds whatever the budget: that is when a probe can change the
    # decision (and its hindsight judges the whole stretch since the last one)
    close_call: float = 0.85
    close_probe_every: int = 12
    neighbour_every: int = 8  # rounds at the best k between tries of the size beside it
    margin: float = 1.03  # speculate only where it beats plain by this much
    # a draft the controller chose keeps playing, at most `stay_k` tokens a round, while its
    # estimates raised by `stay_z` standard errors still say it pays, for up to `stay_rounds`
    # rounds in a row: two unlucky rounds bypassed a paying draft until the next probe (staying.py)
    stay_z: float = 0.5
    stay_rounds: int = 3
    stay_k: int = 3
    # once the draft has played no priced round for `stale_after` rounds, its prices may be a
    # slower spell's: the longest length in dispute is played `fresh_rounds` to price it anew
    # (recheck.py); None never
    stale_after: int | None = 64
    fresh_rounds: int = 3
    # while the draft clearly does not pay, the full choice is made only every
    # `coast_rounds + 1` rounds (its estimates move slowly while it sits out)
    coast_rounds: int = 3
    decay: float = 0.92  # how fast acceptance estimates forget
    predicted_weight: float = 1 / 3  # a token the link predicts, as a share of a round
    bonus_weight: float = 1.0  # a fully accepted round's next token, priced by the link
    queue_trials: int = 4  # queued plain steps explored, where the loop can queue them
    clean_every: int = 64  # rounds between plain steps timed alone, the costs' reference
    # as rare while the draft clearly loses and plain's price holds: each such step and the one
    # after it cost a quarter of a step on a GPU, 1% of an answer that never drafts at 64
    coasting_clean_every: int = 256
    # rounds before a due probe in which a learning link wants the main's confidence
    confidence_lead: int = 64
    # a round whose passes take `one_time_factor` times their price and `one_time_floor` seconds
    # more is a one-time cost (a shape's kernels compiled), kept out of the costs once per shape;
    # None takes every round in (one_time.py)
    one_time_factor: float | None = 3.0
    one_time_floor: float = 0.1


DEFAULTS = AdaptiveConfig()
