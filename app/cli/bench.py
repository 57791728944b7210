"""`python -m app bench`: plain, mlx-lm and SpecChat decoding side by side, with ratios."""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from app.cli.options import add_model_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--prompts", default="builtin", help="'builtin' or a JSON file of {id, class, prompt}")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--k", type=int, default=4, help="draft length for mlx_lm and fixed (default 4)")
    parser.add_argument("--modes", default="plain,mlx_lm,fixed", help="comma-separated: plain, mlx_lm, fixed")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1, help="runs of each mode per prompt")
    parser.add_argument("--classes", help="only these prompt classes (comma-separated)")
    parser.add_argument("--json", metavar="OUT", help="write every run as JSON")


def _aggregate(runs: list) -> dict[str, float]:
    span = sum(r.seconds for r in runs)
    proposed = sum(r.proposed for r in runs)
    rounds = sum(r.rounds for r in runs)
    return {
        "tok_per_s": sum(max(r.tokens - 1, 0) for r in runs) / span if span else 0.0,
        "acceptance": sum(r.accepted for r in runs) / proposed if proposed else 0.0,
        "per_round": sum(r.accepted for r in runs) / rounds if rounds else 0.0,
        "identical": all(r.identical_to_plain for r in runs),
    }


def format_table(runs: list) -> str:
    """One table per prompt class, then all classes together."""
    by_class: dict[str, list] = defaultdict(list)
    for r in runs:
        by_class[r.prompt_class].append(r)
    by_class["all"] = list(runs)
    lines = []
    header = f"{'class':<11}{'mode':<8}{'tok/s':>8}{'×plain':>8}{'×mlx_lm':>9}{'accept':>8}{'acc/rnd':>9}  identical"
    for cls, cls_runs in by_class.items():
        lines.append(header)
        modes = list(dict.fromkeys(r.mode for r in cls_runs))
        agg = {m: _aggregate([r for r in cls_runs if r.mode == m]) for m in modes}
        for m in modes:
            a = agg[m]
            rel = lambda ref: f"{a['tok_per_s'] / agg[ref]['tok_per_s']:.2f}" if ref in agg and agg[ref]["tok_per_s"] else "-"  # noqa: E731
            lines.append(
                f"{cls:<11}{m:<8}{a['tok_per_s']:>8.1f}{rel('plain'):>8}{rel('mlx_lm'):>9}"
                f"{a['acceptance']:>8.0%}{a['per_round']:>9.2f}  {'yes' if a['identical'] else 'NO'}"
            )
        lines.append("")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from app.engine.bench import load_prompts, run_benchmark
    from app.engine.loading import ModelLoadError, load_pair
    from app.engine.sampling import SamplingParams

    try:
        prompts = load_prompts(args.prompts)
        if args.classes:
            wanted = set(args.classes.split(","))
            prompts = [p for p in prompts if p.prompt_class in wanted]
        pair = load_pair(args.main, args.draft)
        sampling = SamplingParams(temperature=args.temperature, seed=args.seed)
        runs = []
        for r in run_benchmark(
            pair, prompts, modes=tuple(args.modes.split(",")), k=args.k, max_tokens=args.max_tokens,
            sampling=sampling, repeats=args.repeats, progress=lambda s: print(s, file=sys.stderr, flush=True),
        ):
            runs.append(r)
    except (ModelLoadError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"main={args.main} draft={args.draft} k={args.k} max_tokens={args.max_tokens} temperature={args.temperature}")
    print(format_table(runs))
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_json() for r in runs], indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0
