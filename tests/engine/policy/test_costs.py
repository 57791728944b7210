"""What a pass costs, as the controller keeps it: prices that follow the machine, not the noise."""

import pytest

from app.engine.policy.costs import CostTable, QueuedSteps, VerifyCosts


def _plain_steps(costs: VerifyCosts, seconds: float, n: int) -> None:
    for _ in range(n):
        costs.add(1, seconds)


def test_a_stale_dear_size_does_not_raise_a_larger_one_played_since():
    """Passes over 5 tokens were timed while the machine was slow and not played since; passes
    over 9 are played every round at their real price. The table stays non-decreasing by
    lowering the stale size, so the size in play keeps what it costs (raised to the stale
    price, k = 8 looked 25% dearer than it was and was bypassed)."""
    costs = VerifyCosts()
    _plain_steps(costs, 0.010, 8)
    for _ in range(3):
        costs.add(5, 0.015)
    for _ in range(5):
        costs.add(9, 0.012)
    table = costs.table(9)
    assert table[8] == pytest.approx(0.012)
    assert table == sorted(table)
    assert table[0] == pytest.approx(0.010)  # the plain step is never lowered: it is the reference
    assert table[4] <= 0.012


def test_the_plain_step_is_never_priced_under_one_step():
    costs = VerifyCosts()
    _plain_steps(costs, 0.010, 8)
    costs.add(2, 0.009)  # noise: a pass over two tokens timed under a plain step
    assert costs.table(3)[:2] == pytest.approx([0.010, 0.010])


def test_prices_keep_their_seconds_while_the_plain_step_is_first_measured():
    """The first plain step came out 15% fast; passes over 2 tokens were then kept as multiples
    of it. As more plain steps correct the reference those prices keep their seconds, in the
    verify table and in every table that shares the reference, where they used to grow with the
    correction and stay 18% too dear."""
    costs = VerifyCosts()
    drafting, queued = CostTable(costs.plain_step), QueuedSteps()
    costs.followers = [drafting, queued]
    costs.add(1, 0.0085)
    for _ in range(5):
        costs.add(2, 0.0104)
        drafting.add(4, 0.0050)
        queued.add(0.0090 / 0.0085)
    queued.close()
    _plain_steps(costs, 0.010, 6)
    assert costs.plain.value == pytest.approx(0.010)
    assert costs.table(2)[1] == pytest.approx(0.0104)
    assert drafting.table(4)[3] == pytest.approx(0.0050)
    assert queued.value * costs.plain.value == pytest.approx(0.0090)


def test_once_the_plain_step_is_known_its_moves_are_the_machine_and_move_every_price():
    costs = VerifyCosts()
    _plain_steps(costs, 0.010, 8)
    for _ in range(3):
        costs.add(4, 0.012)
    _plain_steps(costs, 0.020, 9)  # the machine now runs at half the speed
    assert costs.table(4)[3] == pytest.approx(0.024)


def test_a_run_of_queued_steps_is_one_sample_however_a_stretch_cuts_it():
    """Seen on an H100: runs of nine queued plain steps, each read waiting for the pass queued
    behind it but the last (nothing queued behind it, its pass already done). Cut into eight
    and one, the one was a sample of a fifth of a step, and plain was priced at a quarter of
    its cost; as one sample per run, plain is what the nine cost together."""
    queued = QueuedSteps()
    for _ in range(5):
        for _ in range(8):
            queued.add(1.0)
        queued.add(0.2)
        queued.close()  # a draft round ends the run
    assert queued.value == pytest.approx(8.2 / 9)
    assert queued.price(0.01, 0.02) == pytest.approx(0.01 * 8.2 / 9)
    # a run of ten ends as eight and two, and the two are short of half a stretch: still one
    for x in [1.0] * 9 + [0.2]:
        queued.add(x)
    queued.close()
    assert queued.means.samples[-1] == pytest.approx(9.2 / 10)
