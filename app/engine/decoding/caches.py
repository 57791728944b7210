"""Checking that a model's cache holds what the session says it does.

Every layer's offset must equal the number of tokens the session has fed that model: a trim
that comes up short on one layer would leave that layer attending to a token the answer no
longer has, and the answer would go on, silently different from the main model's own.
"""

from __future__ import annotations

from typing import Any


def layer_offsets(cache: list[Any]) -> list[int | None]:
    """Each layer's offset; None where a layer keeps none (a recurrent state has no length)."""
    out: list[int | None] = []
    for layer in cache:
        offset = getattr(layer, "offset", None)
        out.append(offset if isinstance(offset, int) else None)
    return out


def misfit(cache: list[Any], expected: int) -> str | None:
    """None when every layer with an offset holds `expected` entries, else which ones do not."""
    short = [i for i, layer in enumerate(cache) if getattr(layer, "inexact", False)]
    if short:
        return f"layer {short[0]} was rewound past the sliding window it keeps"
    wrong = [(i, o) for i, o in enumerate(layer_offsets(cache)) if o is not None and o != expected]
    if not wrong:
        return None
    i, offset = wrong[0]
    more = f", and {len(wrong) - 1} more layers" if len(wrong) > 1 else ""
    return f"layer {i} holds {offset} entries where {expected} were expected{more}"
