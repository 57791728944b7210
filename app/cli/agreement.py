"""`python -m app agreement`: exact-match against residual acceptance when sampling, computed from
the two models' distributions along answers sampled from the main (no acceptance coin flips)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.options import add_model_arguments

if TYPE_CHECKING:  # imported when the command runs, so --help starts without MLX
    from app.engine.measure.agreement import Agreement


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument(
        "--prompts", default="builtin", help="'builtin' or a JSON file of {id, class, prompt}"
    )
    parser.add_argument("--classes", help="only these prompt classes (comma-separated)")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens sampled from the main per prompt")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--min-p", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--k", default="1,2,4,8", help="draft lengths to report accepted tokens per round for"
    )
    parser.add_argument("--json", metavar="OUT", help="write every position's acceptance chances as JSON")


def format_rows(label: str, parts: list[Agreement], ks: tuple[int, ...]) -> list[str]:
    from app.engine.measure.agreement import accepted_per_round, per_token

    exact, residual = per_token(parts, "exact"), per_token(parts, "residual")
    cells = [
        f"{label:<14}{sum(len(p.exact) for p in parts):>6}{exact:>8.2f}{residual:>8.2f}"
        f"{residual / exact if exact else 0.0:>7.2f}"
    ]
    for k in ks:
        e, r = accepted_per_round(parts, "exact", k), accepted_per_round(parts, "residual", k)
        cells.append(f"{e:>8.2f}{r:>7.2f}{r / e if e else 0.0:>6.2f}")
    return ["".join(cells)]


def run(args: argparse.Namespace) -> int:
    from app.engine.decoding.decode import generate
    from app.engine.decoding.events import GenerationFinished
    from app.engine.decoding.loading import ModelLoadError
    from app.engine.decoding.sampling import Sampler, SamplingParams
    from app.engine.decoding.session import ChatSession
    from app.engine.decoding.templates.chat import format_chat
    from app.engine.library.pairing import load_checked_pair
    from app.engine.measure.agreement import agreement
    from app.engine.measure.bench import load_prompts

    try:
        ks = tuple(int(k) for k in str(args.k).split(","))
        if any(k < 1 for k in ks):
            raise ValueError("--k takes draft lengths of 1 or more")
        sampling = SamplingParams(
            temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, min_p=args.min_p, seed=args.seed
        )
        if sampling.greedy:
            raise ValueError("greedy decoding has no distributions to compare: give --temperature above 0")
        prompts = load_prompts(args.prompts, args.classes)
        if not args.draft:
            raise ValueError("agreement needs --draft")
        pair = load_checked_pair(args.main, args.draft, force=args.force)
    except (ModelLoadError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    assert pair.draft is not None
    results = []
    for i, prompt in enumerate(prompts):
        print(f"{prompt.id}: sampling {args.max_tokens} tokens from the main", file=sys.stderr, flush=True)
        context = format_chat(pair.tokenizer, [{"role": "user", "content": prompt.text}])
        answer = replace(sampling, seed=args.seed + i)  # a different draw per prompt
        finished = [
            e
            for e in generate(ChatSession(pair), context, sampling=answer, max_tokens=args.max_tokens)
            if isinstance(e, GenerationFinished)
        ][0]
        if not finished.token_ids:
            print(f"{prompt.id}: the main stopped at once; skipped", file=sys.stderr)
            continue
        found = agreement(pair.main, pair.draft, Sampler(sampling), context, list(finished.token_ids))
        results.append((prompt, found))

    print(
        f"main={args.main} draft={args.draft} temperature={args.temperature} seed={args.seed} "
        f"max_tokens={args.max_tokens}"
    )
    print("per token: the chance a draft proposal stands; k=K: expected proposals accepted per round")
    header = f"{'prompt':<14}{'tokens':>6}{'exact':>8}{'resid':>8}{'ratio':>7}"
    header += "".join(f"{'k=' + str(k) + ' ex':>8}{'resid':>7}{'ratio':>6}" for k in ks)
    lines = [header]
    by_class: dict[str, list[Agreement]] = defaultdict(list)
    for prompt, found in results:
        lines += format_rows(prompt.id, [found], ks)
        by_class[prompt.prompt_class].append(found)
    lines.append("")
    for cls, parts in by_class.items():
        lines += format_rows(cls, parts, ks)
    lines += format_rows("all", [f for _, f in results], ks)
    print("\n".join(lines))
    if args.json:
        data = [
            {"id": p.id, "class": p.prompt_class, "exact": f.exact, "residual": f.residual}
            for p, f in results
        ]
        Path(args.json).write_text(json.dumps(data, indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0
