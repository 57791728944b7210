"""The controller's acceptance estimates: cached between changes, never stale after one."""

from __future__ import annotations

import copy

from app.engine.estimates import AcceptanceCounts, tokens_by_k


def _fresh(counts: AcceptanceCounts, k: int) -> list[float]:
    """The estimates computed from the counts as they are now, bypassing any cache."""
    clone = copy.deepcopy(counts)
    clone._estimates = ((-1, 0), (), ())
    return list(clone.estimates(k))


def test_estimates_follow_every_kind_of_update_and_are_reused_between_them():
    counts = AcceptanceCounts(0.5, 1.0, 0.92)
    record = AcceptanceCounts(0.5, 1.0, 0.995)
    for _ in range(5):
        record.add(4, 1)
    updates = [
        lambda: counts.add(4, 4),
        lambda: counts.add(3, 0, weight=1 / 3),
        lambda: counts.add_expected([0.9, 0.8, 0.7], 1 / 3),
        lambda: counts.add_at(2, 0.2, 1.0),
        lambda: counts.restart_from(record, rounds=6),
        lambda: counts.add(6, 2),
    ]
    before = counts.estimates(6)
    for update in updates:
        update()
        after = counts.estimates(6)
        assert list(after) == _fresh(counts, 6) and after != before
        assert list(counts.tokens(6)) == tokens_by_k(list(after))
        before = after
    assert counts.estimates(6) is before  # unchanged counts: the same estimates, not recomputed
    assert len(counts.estimates(3)) == 3 and list(counts.estimates(3)) == _fresh(counts, 3)
