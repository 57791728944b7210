"""The controller's acceptance estimates: cached between changes, never stale after one."""

from __future__ import annotations

import copy

import pytest

from app.engine.policy.estimates import AcceptanceCounts, tokens_by_k


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
        lambda: counts.add_predicted([0.9, 0.5], 0.8, 1 / 3, 8),
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


def test_predicted_tokens_add_up_to_the_rounds_the_draft_could_have_started():
    """Token by token, predictions count exactly what each round starting at each token would
    have had in expectation (a trial at position j with the chance all before it passed), up to
    the longest draft, without waiting for a round's tokens to be complete."""
    hits_by_token, longest, weight = [0.9, 0.5, 0.8, 0.7, 0.95], 3, 0.5
    counts = AcceptanceCounts(0.5, 1.0, 1.0)  # no forgetting: the sums are exact
    open_rounds: list[float] = []
    for i, p in enumerate(hits_by_token):
        counts.add_predicted(open_rounds, p, weight, longest)
        if i == 0:  # the first token already counts, as the first trial of its own round
            assert counts.trials[0] == weight and counts.hits[0] == pytest.approx(weight * p)
    trials, hits = [0.0] * longest, [0.0] * longest
    for start in range(len(hits_by_token)):
        reach = 1.0
        for j, p in enumerate(hits_by_token[start : start + longest]):
            trials[j] += weight * reach
            reach *= p
            hits[j] += weight * reach
    assert counts.trials[:longest] == pytest.approx(trials) and counts.hits[:longest] == pytest.approx(hits)
    assert not any(counts.trials[longest:]) and len(open_rounds) == longest - 1
