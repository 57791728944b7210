"""`python -m app ui-bench`: stream a synthetic answer through the real window and report."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=2000.0, help="synthetic tokens per second")
    parser.add_argument("--tokens", type=int, default=20_000, help="length of the answer")


def run(args: argparse.Namespace) -> int:
    from app.devtools.bench import report, verdict
    from app.devtools.bench import run as bench

    result = bench(args.rate, args.tokens)
    print(report(result))
    targets = verdict(result)
    for words, met in targets:
        print(f"{'met' if met else 'not judged' if met is None else 'MISSED'}: {words}")
    ok = all(met is not False for _, met in targets)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1
