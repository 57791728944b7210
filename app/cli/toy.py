"""`python -m app toy-models OUT`: write the deterministic tiny main/draft pair for tests, or
(`--pair`) a random pair at Qwen2.5's real sizes with a chosen draft agreement, for timing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.engine.measure.toy_shapes import PAIRS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "out", metavar="OUT", type=Path, help="folder to write main/, draft/, draft_random/ into"
    )
    parser.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    parser.add_argument(
        "--dtype", choices=("float32", "float16", "bfloat16"), default="float32", help="weight dtype"
    )
    parser.add_argument(
        "--shape",
        choices=("tiny", "1.5b"),
        default="tiny",
        help="tiny (default, for tests) or 1.5b (Qwen2.5-1.5B layer sizes, for timing on a GPU)",
    )
    parser.add_argument(
        "--pair",
        choices=sorted(PAIRS),
        help="instead: a real-shape main (1.5B, 7B or 14B) and a 0.5B draft, written as main/ and draft/",
    )
    parser.add_argument("--bits", type=int, choices=(4, 16), help="with --pair: 4-bit or bfloat16 weights")
    parser.add_argument(
        "--agreement",
        type=float,
        default=0.9,
        help="with --pair: share of positions where the draft's greedy token is the main's (default 0.9)",
    )


def run(args: argparse.Namespace) -> int:
    from app.engine.measure.toy import write_toy_models

    try:
        if args.pair is not None:
            from app.engine.measure.toy_pair import write_pair

            main, draft = write_pair(args.out, args.pair, args.bits, args.agreement, args.seed)
            print(f"main:  {main}")
            print(f"draft: {draft}")
            return 0
        models = write_toy_models(args.out, seed=args.seed, dtype=args.dtype, shape=args.shape)
    except (FileExistsError, ValueError) as error:
        print(f"toy-models: {error}", file=sys.stderr)
        return 2
    print(f"main:         {models.main}")
    print(f"draft:        {models.draft}")
    print(f"draft_random: {models.draft_random}")
    return 0
