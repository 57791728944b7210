"""The adaptive controller's settings: one table, each with its bounds and why (docs/adaptive.md)."""

from __future__ import annotations

from dataclasses import dataclass, fields

MAX_K = 8  # the longest draft the controller plays unless told otherwise


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """Everything the controller can be tuned by. Out-of-bounds values raise ValueError."""

    # the longest draft: past 8 tokens even a draft right 90% of the time adds little per round
    max_k: int = MAX_K
    # the draft length played before anything is measured: long enough to learn acceptance at
    # several positions, short enough that a useless draft costs little
    start_k: int = 3
    # draft rounds (and plain steps) measured before the controller trusts its costs
    learn_rounds: int = 6
    # a draft length is played only where it beats plain by this factor, so noise in the
    # estimates does not make the controller flap between drafting and plain
    margin: float = 1.03
    # each round keeps this share of the acceptance counts: the text changes within an answer
    forget: float = 0.95
    # acceptance starts from 0.5 held at this many rounds' weight, so two lucky (or unlucky)
    # rounds do not decide alone
    prior_rounds: float = 2.0
    # passes timed per size (and plain steps, and drafts): the median of that many ignores a
    # one-time cost (a shape compiled) or a stall while following a machine that changed speed
    window: int = 15
    # while bypassed, probes may cost at most this share of the time plain decoding takes: a
    # draft that never pays then costs about this much against plain
    probe_share: float = 0.015
    # a probe drafts this many tokens: enough to see whether the draft is right again
    probe_k: int = 2
    # a draft never reads more than the last this many tokens it skipped while bypassed: on a
    # CPU reading costs a share of a step per token, and a long bypass would make a probe dear
    probe_read: int = 16

    def __post_init__(self) -> None:
        bounds: dict[str, tuple[float, float]] = {
            "max_k": (1, 16),
            "start_k": (1, self.max_k),
            "learn_rounds": (1, 64),
            "margin": (1.0, 2.0),
            "forget": (0.5, 1.0),
            "prior_rounds": (0.1, 100.0),
            "window": (1, 1000),
            "probe_share": (0.0, 0.5),
            "probe_k": (1, self.max_k),
            "probe_read": (1, 4096),
        }
        for f in fields(self):
            value, (low, high) = getattr(self, f.name), bounds[f.name]
            if not low <= value <= high:
                raise ValueError(f"{f.name} must be between {low} and {high}, got {value}")


DEFAULT_SETTINGS = ControllerSettings()
# the status strip says a draft is almost never right below this share of its judged proposals
# (a real draft is right on a third even of a poem; a random-weight one on nothing)
RARELY_RIGHT = 1 / 48
RARELY_RIGHT_AFTER = 16  # proposals judged before that can be said (0 of 16 is 1 in 600 for a third)
