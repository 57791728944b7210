"""Ordering drafts for a chosen main: compatible first, same family next, then a useful size ratio.

A draft about a tenth of the main's size is the usual sweet spot: much smaller guesses badly,
much larger costs as much as it saves.
"""

from __future__ import annotations

import math

from app.engine.library.compat import Verdict
from app.engine.library.facts import ModelFacts

IDEAL_RATIO = 0.1


def _ratio_distance(main: ModelFacts, draft: ModelFacts) -> float:
    if not main.params or not draft.params:
        return math.inf
    return abs(math.log(draft.params / main.params / IDEAL_RATIO))


def same_family(main: ModelFacts, draft: ModelFacts) -> bool:
    return main.architecture == draft.architecture or (
        main.vocab_fingerprint is not None and main.vocab_fingerprint == draft.vocab_fingerprint
    )


def rank_drafts(
    main: ModelFacts, drafts: list[tuple[ModelFacts, Verdict]]
) -> list[tuple[ModelFacts, Verdict]]:
    others = [(d, v) for d, v in drafts if d.path != main.path]
    return sorted(
        others,
        key=lambda dv: (
            not dv[1].compatible,
            not same_family(main, dv[0]),
            _ratio_distance(main, dv[0]),
            dv[0].name,
        ),
    )
