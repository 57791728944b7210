"""`python -m app toy-models OUT`: write the deterministic tiny main/draft pair for tests."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


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


def run(args: argparse.Namespace) -> int:
    from app.engine.measure.toy import write_toy_models

    try:
        models = write_toy_models(args.out, seed=args.seed, dtype=args.dtype, shape=args.shape)
    except (FileExistsError, ValueError) as error:
        print(f"toy-models: {error}", file=sys.stderr)
        return 2
    print(f"main:         {models.main}")
    print(f"draft:        {models.draft}")
    print(f"draft_random: {models.draft_random}")
    return 0
