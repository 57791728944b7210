"""`python -m app generate`: one answer from the command line, drafted tokens coloured."""

from __future__ import annotations

import argparse
import sys

from app.cli.options import add_model_arguments, add_sampling_arguments, sampling_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    add_sampling_arguments(parser)
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


def run(args: argparse.Namespace) -> int:
    from app.engine.decoding.decode import generate
    from app.engine.decoding.events import EngineError, GenerationFinished, Provenance, TokenEvent
    from app.engine.decoding.loading import ModelLoadError, load_pair
    from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
    from app.engine.decoding.session import ChatSession
    from app.engine.decoding.templates import TemplateError, format_chat

    try:
        pair = load_pair(args.main, args.draft)
        sampling = sampling_from_args(args)
        policy = FixedDraftLength(args.k) if args.draft else PlainDecoding()
        messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
            {"role": "user", "content": args.prompt}
        ]
        prompt = format_chat(pair.tokenizer, messages)
    except (ModelLoadError, TemplateError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    session = ChatSession(pair)
    for event in generate(session, prompt, sampling=sampling, policy=policy, max_tokens=args.max_tokens):
        if isinstance(event, TokenEvent):
            drafted = colour and event.provenance is not Provenance.MAIN
            sys.stdout.write(f"\x1b[32m{event.text}\x1b[0m" if drafted else event.text)
            sys.stdout.flush()
        elif isinstance(event, EngineError):
            print(f"\n[{event.kind}] {event.message}", file=sys.stderr)
        elif isinstance(event, GenerationFinished):
            sys.stdout.write(event.tail + "\n")
            s = event.stats
            print(
                f"[{event.reason}] {s.tokens} tokens, {s.tokens_per_second:.1f} tok/s, "
                f"prefill {s.prefill_seconds:.2f}s, acceptance {s.acceptance:.0%} "
                f"({s.accepted}/{s.proposed}), {s.mean_accepted_per_round:.2f} accepted per round",
                file=sys.stderr,
            )
    return 0
