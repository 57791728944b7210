"""`python -m app toy-models OUT`: write the deterministic tiny main/draft pair for tests."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", metavar="OUT", type=Path, help="folder to write main/, draft/, draft_random/ into")
    parser.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    parser.add_argument(
        "--dtype", choices=("float32", "float16", "bfloat16"), default="float32", help="weight dtype"
    )


def run(args: argparse.Namespace) -> int:
    from app.engine.toy import write_toy_models

    try:
        models = write_toy_models(args.out, seed=args.seed, dtype=args.dtype)
    except (FileExistsError, ValueError) as error:
        print(f"toy-models: {error}", file=sys.stderr)
        return 2
    print(f"main:         {models.main}")
    print(f"draft:        {models.draft}")
    print(f"draft_random: {models.draft_random}")
    return 0
