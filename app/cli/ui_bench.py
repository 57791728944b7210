"""`python -m app ui-bench`: stream a synthetic answer through the real window, then paste and
switch huge text there, and report each against its targets."""

from __future__ import annotations

import argparse

CASES = ("stream", "paste", "switch")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=2000.0, help="synthetic tokens per second")
    parser.add_argument("--tokens", type=int, default=20_000, help="length of the answer")
    parser.add_argument(
        "--case",
        dest="cases",
        action="append",
        choices=CASES,
        help="run only this case (repeatable): stream (a long answer), paste (100 MB and 100,000"
        " blank lines sent), switch (a 10 MB draft switched to and away); all by default",
    )


def run(args: argparse.Namespace) -> int:
    from app.devtools import bench, bench_text

    targets: list[tuple[str, bool | None]] = []
    cases = args.cases or CASES
    if "stream" in cases:
        result = bench.run(args.rate, args.tokens)
        print(bench.report(result))
        targets += bench.verdict(result)
    for name, case in (("paste", bench_text.paste_case), ("switch", bench_text.switch_case)):
        if name in cases:
            outcome = case()
            print(bench_text.case_report(outcome))
            targets += bench_text.case_verdict(outcome)
    for words, met in targets:
        print(f"{'met' if met else 'not judged' if met is None else 'MISSED'}: {words}")
    ok = all(met is not False for _, met in targets)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1
