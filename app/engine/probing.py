"""How often a bypassed draft can be probed, and how much of what it skipped a probe reads,
within the probe budget: the arithmetic behind `AdaptiveDraftLength._probe`.

All costs are in seconds: `extra` is a probe's own passes beyond a plain step, `read` what the
draft's reading one skipped token costs, `budget` the share of a plain round probes may take
(with any close-call premium), `base` the same without it.
"""

from __future__ import annotations

import math


def affordable_interval(extra: float, read: float, budget: float, base: float, floor: int, probe_read: int) -> int:
    """The fewest bypassed rounds after which a probe fits the budget: its extra passes plus
    reading the skipped tokens; where that takes more than twice as long as reading only the
    last `probe_read` of them, the probe reads those, within the `base` budget (no close-call
    premium: a gap costs the draft context, so such a probe undersells it; on the real pair,
    acceptance after a 36-token gap fell from 0.76 to 0.55)."""
    windowed = max(floor, probe_read, math.ceil((extra + probe_read * read) / base))
    if budget > read:
        full = max(floor, math.ceil(extra / (budget - read)))
        if full <= max(probe_read, 2 * windowed):
            return full
    return windowed


def read_limit(skipped: int, extra: float, read: float, budget: float, base: float, probe_read: int) -> int | None:
    """How many of the `skipped` tokens a probe reads: all (None) where `budget` affords it,
    else as many as the `base` budget of the rounds since the draft's last use affords, and
    at least `probe_read`."""
    if read <= 0.0 or skipped * budget - extra >= skipped * read:
        return None
    return max(probe_read, int((skipped * base - extra) / read))
