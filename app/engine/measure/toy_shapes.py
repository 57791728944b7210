"""Qwen2.5's real layer sizes, the main/draft pairs built from them, and the greedy maps that
give a random pair a chosen agreement.

Random weights at a real shape cost what the real model costs per step (every weight is read
whatever its value), but an independent random draft agrees with nothing. So each model's
greedy next token is made a function of the current token alone: next(t) = perm[t], with the
main's perm one cycle through the ids the toy tokenizer can decode and the draft's perm equal
to it on a chosen fraction of those ids (toy_pair.py builds the weights that do this).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The toy tokenizer's special tokens take ids 0-2; the cycle never emits them, so no answer
# ends early and every mode decodes the same number of tokens.
FIRST_TEXT_ID = 3


@dataclass(frozen=True)
class RealShape:
    """One model's sizes, as in its config.json (untied lm_head: see toy_pair.py)."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int


# From the Qwen2.5 base/instruct config.json files. 0.5B and 1.5B tie lm_head to the
# embedding; here it is a separate matrix of the same size, which a step reads just the same.
SHAPES = {
    "0.5b": RealShape("0.5b", hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864, vocab=151936),
    "1.5b": RealShape("1.5b", hidden=1536, layers=28, heads=12, kv_heads=2, intermediate=8960, vocab=151936),
    "7b": RealShape("7b", hidden=3584, layers=28, heads=28, kv_heads=4, intermediate=18944, vocab=152064),
    "14b": RealShape("14b", hidden=5120, layers=48, heads=40, kv_heads=8, intermediate=13824, vocab=152064),
    # CPU-sized, for tests: a vocabulary larger than the tokenizer's, as the real ones are
    "tiny": RealShape("tiny", hidden=256, layers=4, heads=4, kv_heads=2, intermediate=768, vocab=4096),
    "tiny-draft": RealShape(
        "tiny-draft", hidden=128, layers=1, heads=2, kv_heads=1, intermediate=384, vocab=4096
    ),
}


@dataclass(frozen=True)
class PairSpec:
    """A main and a smaller draft at one precision (bits 16 is bfloat16 unless `dtype` says)."""

    name: str
    main: RealShape
    draft: RealShape
    bits: int
    dtype: str = "bfloat16"


def _pairs() -> dict[str, PairSpec]:
    pairs = {"tiny": PairSpec("tiny", SHAPES["tiny"], SHAPES["tiny-draft"], 16, "float32")}
    for main in ("1.5b", "7b", "14b"):
        for bits, label in ((16, "bf16"), (4, "4bit")):
            name = f"{main}-{label}"
            pairs[name] = PairSpec(name, SHAPES[main], SHAPES["0.5b"], bits)
    return pairs


PAIRS = _pairs()


def pair_spec(name: str, bits: int | None = None) -> PairSpec:
    """The named pair; `bits` (4 or 16) overrides its precision."""
    if name not in PAIRS:
        raise ValueError(f"unknown pair {name!r}; choose from {', '.join(PAIRS)}")
    spec = PAIRS[name]
    if bits is None or bits == spec.bits:
        return spec
    if bits not in (4, 16):
        raise ValueError(f"bits must be 4 or 16, not {bits}")
    return PairSpec(f"{name}@{bits}bit", spec.main, spec.draft, bits, spec.dtype)


@dataclass(frozen=True)
class GreedyMaps:
    """next(t) for t below `text_vocab`: the main's and the draft's greedy successor of each id."""

    main: np.ndarray
    draft: np.ndarray

    def agreement(self) -> float:
        """The fraction of cycle ids where the draft's successor is the main's."""
        ids = np.arange(FIRST_TEXT_ID, len(self.main))
        return float(np.mean(self.main[ids] == self.draft[ids]))


def greedy_maps(text_vocab: int, agreement: float, seed: int) -> GreedyMaps:
    """One random cycle through the text ids for the main; the draft follows it at a random
    `agreement` share of them and skips one step ahead at the rest.

    Random positions (not evenly spaced ones) give runs of agreement of random length, as a real
    draft's are, so accepted lengths per round spread as they would.
    """
    if not 0.0 <= agreement <= 1.0:
        raise ValueError(f"agreement must be between 0 and 1, not {agreement}")
    rng = np.random.RandomState(seed)
    cycle = FIRST_TEXT_ID + rng.permutation(text_vocab - FIRST_TEXT_ID)
    n = len(cycle)
    main = np.empty(text_vocab, dtype=np.int64)
    main[cycle] = np.roll(cycle, -1)
    # a special token (the end of the prompt may be one) leads into the cycle
    main[:FIRST_TEXT_ID] = cycle[0]
    draft = main.copy()
    wrong = rng.choice(n, size=round((1.0 - agreement) * n), replace=False)
    draft[cycle[wrong]] = cycle[(wrong + 2) % n]
    return GreedyMaps(main, draft)
