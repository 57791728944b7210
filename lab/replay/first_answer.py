"""How fast can any controller's first answer be, once prices are known?

The speed gate asks a never-seen pair's first answer to keep 0.9 of the best fixed k. This
computes, for the gate's verify shapes and draft costs, the first answer of the best possible
learner: one that knows every price (the draft's, each verify size's, plain's) and that the
draft is right independently on each token with one of the gate's acceptances, equally likely
before the first round. Each round it plays the k (0: plain) that minimises the expected time
to finish the answer, averaged over what it believes of the acceptance, each acceptance's time
counted against what the best fixed k takes at it; found exactly by dynamic programming over
(tokens left, proposals accepted, proposals refused), which is all it knows. Its expected first
answer, against the best fixed k's and plain's at each true acceptance, says whether the gate's
first-answer target can be met at all, and by what learning.

Expected times, not noisy draws: the gate's answers add timing noise and bursty drafts, which
this leaves out. `python -m lab.replay.first_answer [--tokens N]` prints the table; with
`--hopeful Q`, the same for a rule a controller could run each round instead (`hopeful_learner`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from app.engine.policy.oracle import expected_tokens
from app.engine.policy.settings import MAX_K
from lab.replay.gate import ALPHAS, DRAFT_COSTS, PAYS, SHAPES, Cell


def round_costs(shape: str, draft_cost: float) -> list[float]:
    """A round's cost for k = 0 (a plain step, queued where the shape queues them) to MAX_K, as
    the gate's cell prices it, in plain steps of the main; a catch-up read is left out."""
    costs = Cell(shape, draft_cost, alpha=0.0, bursty=False, length=0).costs()
    plain = costs.queued or costs.verify[0] + costs.overhead
    return [plain] + [
        costs.draft_seconds(k, 0) + costs.verify_seconds(k + 1) + costs.overhead for k in range(1, MAX_K + 1)
    ]


def outcomes(alpha: float, k: int) -> list[tuple[float, int]]:
    """(probability, proposals accepted) of a round of k at acceptance `alpha`."""
    return [(alpha**a * (1 - alpha), a) for a in range(k)] + [(alpha**k, k)]


def fixed_time(costs: list[float], alpha: float, k: int, tokens: int) -> float:
    """Expected time of an answer at fixed k (never more than the tokens left but one, as the
    decode loop plays it)."""
    expected = [0.0] * (tokens + 1)
    for left in range(1, tokens + 1):
        kk = min(k, left - 1)
        expected[left] = costs[kk] + sum(p * expected[left - a - 1] for p, a in outcomes(alpha, kk))
    return expected[tokens]


@dataclass(frozen=True, slots=True)
class FirstAnswer:
    """A learner at one true acceptance: its share of the best fixed k's speed and of plain's,
    and whether some fixed k beats plain by the gate's PAYS there."""

    alpha: float
    of_best_fixed: float
    of_plain: float
    pays: bool


Learner = Callable[[int, int, int], int]  # (tokens left, proposals accepted, refused) -> k


def first_answers(costs: list[float], learner: Learner, tokens: int) -> list[FirstAnswer]:
    """The learner's expected first answer at each of the gate's acceptances."""
    answers = []
    for alpha in ALPHAS:

        @cache
        def time(left: int, accepted: int, refused: int, alpha: float = alpha) -> float:
            if left == 0:
                return 0.0
            k = learner(left, accepted, refused)
            return costs[k] + sum(
                p * time(left - a - 1, accepted + a, refused + (a < k)) for p, a in outcomes(alpha, k)
            )

        took = time(tokens, 0, 0)
        best = min(fixed_time(costs, alpha, k, tokens) for k in range(MAX_K + 1))
        plain = fixed_time(costs, alpha, 0, tokens)
        answers.append(FirstAnswer(alpha, best / took, plain / took, plain >= PAYS * best))
    return answers


def best_learner(costs: list[float], tokens: int) -> Learner:
    """The k that minimises the expected time to the end of the answer, each acceptance's time
    counted against its best fixed k's, over the belief the rounds so far give."""
    weight = {a: 1 / min(fixed_time(costs, a, k, tokens) for k in range(MAX_K + 1)) for a in ALPHAS}

    @cache
    def plan(left: int, accepted: int, refused: int) -> tuple[float, int]:
        """(expected weighted time to finish, the k that achieves it) from this state."""
        if left == 0:
            return 0.0, 0
        belief = {a: w * a**accepted * (1 - a) ** refused for a, w in weight.items()}
        total = sum(belief.values())
        choice = (costs[0] + plan(left - 1, accepted, refused)[0], 0)
        for k in range(1, min(MAX_K, left - 1) + 1):
            chance = [0.0] * (k + 1)  # of each number accepted, over the belief
            for alpha, b in belief.items():
                for p, a in outcomes(alpha, k):
                    chance[a] += b * p / total
            expected = costs[k] + sum(
                p * plan(left - a - 1, accepted + a, refused + (a < k))[0] for a, p in enumerate(chance)
            )
            choice = min(choice, (expected, k))
        return choice

    return lambda left, accepted, refused: plan(left, accepted, refused)[1]


def hopeful_learner(costs: list[float], quantile: float) -> Learner:
    """A rule a controller could run each round: the k that pays most were the draft right as
    often as the acceptance at `quantile` of the belief (the grid's acceptances equally likely
    before the first round); no look ahead."""

    def choose(left: int, accepted: int, refused: int) -> int:
        belief = [a**accepted * (1 - a) ** refused for a in ALPHAS]
        total, seen, reading = sum(belief), 0.0, ALPHAS[-1]
        for alpha, b in zip(ALPHAS, belief):
            seen += b / total
            if seen >= quantile:
                reading = alpha
                break
        rates = [(1 / costs[0], 0)] + [
            (expected_tokens([reading] * k) / costs[k], k) for k in range(1, min(MAX_K, left - 1) + 1)
        ]
        return max(rates)[1]

    return choose


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.replay.first_answer", description=__doc__)
    parser.add_argument(
        "--tokens", type=int, default=32, help="answer length (default 32, the gate's shortest)"
    )
    parser.add_argument(
        "--hopeful",
        type=float,
        metavar="Q",
        help="the rule that plays the best k at the Q quantile of the belief, instead of the best learner",
    )
    args = parser.parse_args(argv)
    who = f"the rule at the {args.hopeful:g} quantile" if args.hopeful else "the best learner"
    print(f"{who}'s first answer of {args.tokens} tokens, prices known: share of the best fixed k")
    print("(* some fixed k beats plain by 10% there; in brackets, its share of plain's speed)")
    paying, not_paying = [], []
    for shape in SHAPES:
        for cost in DRAFT_COSTS:
            costs = round_costs(shape, cost)
            learner = (
                hopeful_learner(costs, args.hopeful) if args.hopeful else best_learner(costs, args.tokens)
            )
            answers = first_answers(costs, learner, args.tokens)
            paying += [r.of_best_fixed for r in answers if r.pays]
            not_paying += [r.of_plain for r in answers if not r.pays]
            cells = "  ".join(
                f"a{r.alpha:g} {r.of_best_fixed:.3f}{'*' if r.pays else ' '}({r.of_plain:.2f})"
                for r in answers
            )
            print(f"{shape:9} c{cost:<4g} opens at k = {learner(args.tokens, 0, 0)}:  {cells}")
    print(
        f"worst: {min(paying):.3f} of the best fixed k where some k pays, "
        f"{min(not_paying):.3f} of plain where none does"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
