"""Arguments several commands share."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when used: a refused split should not wait for MLX to import
    from app.engine.decoding.sampling import SamplingParams


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--main", required=True, help="main model: MLX folder or hub repo id")
    parser.add_argument("--draft", help="draft model: MLX folder or hub repo id")
    parser.add_argument(
        "--force",
        action="store_true",
        help="load the draft even if it is not compatible with the main; for experiments",
    )


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--min-p", type=float, default=0.0)
    parser.add_argument("--repetition-penalty", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=None)


def sampling_from_args(args: argparse.Namespace) -> SamplingParams:
    from app.engine.decoding.sampling import SamplingParams

    return SamplingParams(
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        min_p=args.min_p,
        repetition_penalty=args.repetition_penalty,
        seed=args.seed,
    )


def add_distributed_arguments(parser: argparse.ArgumentParser) -> None:
    """Split the main model across processes (one machine) or machines (mlx.launch's hostfile)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--ranks", type=int, help="split the main over N local processes (MLX ring backend on 127.0.0.1)"
    )
    where.add_argument(
        "--hostfile", help="split the main over the machines of an mlx.launch JSON hostfile (ssh)"
    )
    parser.add_argument(
        "--rank-timeout",
        type=float,
        default=30.0,
        help="with --ranks/--hostfile: seconds without a token, at least, before a rank counts as lost",
    )
