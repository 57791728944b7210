"""`python -m app compat MAIN DRAFT [--json]`: may DRAFT speculate for MAIN, and why (not)."""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("main", help="main model: a folder, or a repo id already in the hub cache")
    parser.add_argument("draft", help="draft model: a folder, or a repo id already in the hub cache")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")


def run(args: argparse.Namespace) -> int:
    from app.engine.api import check_compatibility

    try:
        verdict = check_compatibility(args.main, args.draft)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(verdict.to_json(), indent=2, ensure_ascii=False))
    else:
        print(f"main:  {verdict.main}\ndraft: {verdict.draft}")
        print("verdict: " + ("compatible" if verdict.compatible else "incompatible"))
        for reason in verdict.reasons:
            print(f"  [{reason.severity}] {reason.code}: {reason.message}")
    return 0 if verdict.compatible else 1
