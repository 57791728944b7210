"""Arguments several commands share."""

from __future__ import annotations

import argparse

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
    return SamplingParams(
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        min_p=args.min_p,
        repetition_penalty=args.repetition_penalty,
        seed=args.seed,
    )
