"""`python -m app generate`: one answer from the command line, drafted tokens coloured."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from app.cli.options import (
    add_distributed_arguments,
    add_model_arguments,
    add_sampling_arguments,
    sampling_from_args,
)

if TYPE_CHECKING:
    from app.engine.api import Notice


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    add_sampling_arguments(parser)
    add_distributed_arguments(parser)
    parser.add_argument("prompt", help="the user's message")
    parser.add_argument("--system", help="system prompt")
    parser.add_argument("--k", type=int, default=4, help="draft length (1-16; default 4)")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour tokens accepted from the draft (default: when writing to a terminal)",
    )


def _print_notices(notices: tuple[Notice, ...], shown: int) -> int:
    """Print the notices not shown yet, where they arrived in the stream; return how many are shown."""
    for notice in notices[shown:]:
        print(f"\n[{notice.kind}] {notice.message}", file=sys.stderr)
    return len(notices)


def run(args: argparse.Namespace) -> int:
    if args.ranks is not None or args.hostfile is not None:
        from app.cli import sharded
        from app.cli.stopping import Stopped, stopped_by_signals

        try:
            with stopped_by_signals():  # the ranks end with this command, however it is stopped
                if (code := sharded.refused(args)) is not None:  # before MLX or any rank starts
                    return code
                colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
                return sharded.run(args, sampling_from_args(args), colour)
        except Stopped as stop:
            sys.stdout.write("\n")
            sys.stdout.flush()
            print(stop.line("the ranks were ended"), file=sys.stderr)
            return stop.code
    from app.engine.api import ModelLoadError, Provenance, TemplateError, load_pair

    try:
        pair = load_pair(args.main, args.draft, force=args.force)
        asked = time.perf_counter()  # the model is loaded: from here on the user waits for words
        messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
            {"role": "user", "content": args.prompt}
        ]
        answer = pair.stream(
            messages,
            mode="fixed" if args.draft else "off",
            k=args.k,
            sampling=sampling_from_args(args),
            max_tokens=args.max_tokens,
        )
    except (ModelLoadError, TemplateError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    shown = 0
    first: float | None = None
    for token in answer:
        if first is None:
            first = time.perf_counter() - asked
        shown = _print_notices(answer.notices, shown)
        drafted = colour and token.provenance is not Provenance.MAIN
        sys.stdout.write(f"\x1b[32m{token.text}\x1b[0m" if drafted else token.text)
        sys.stdout.flush()
    _print_notices(answer.notices, shown)
    finished = answer.answer
    sys.stdout.write(finished.tail + "\n")
    s = finished.stats
    print(
        f"[{finished.finish_reason}] {s.tokens} tokens, {s.tokens_per_second:.1f} tok/s, "
        f"prefill {s.prefill_seconds:.2f}s, acceptance {s.acceptance:.0%} "
        f"({s.accepted}/{s.proposed}), {s.mean_accepted_per_round:.2f} accepted per round"
        + (f", first token after {first:.2f}s" if first is not None else ""),
        file=sys.stderr,
    )
    return 0
