"""`generate --ranks N` / `--hostfile FILE`: one answer with the main split across ranks.

It prints what the one-process `generate` prints; if a rank is lost mid-answer, the text so far
stays printed, the reason goes to stderr and the exit status is 1. Before any rank starts, the
split's checks run (`preflight`): a refusal is one line and exit status 2."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported once the checks pass: a refusal should not wait for MLX to import
    from app.engine.decoding.sampling import SamplingParams
    from app.engine.distributed.session import Placement


def placement(args: argparse.Namespace) -> Placement:
    from app.engine.distributed.session import Placement

    return Placement(ranks=args.ranks, hostfile=args.hostfile)


def refused(args: argparse.Namespace) -> int | None:
    """Run the split's checks (compatibility, memory, the limits on ranks and machines) before
    any rank starts: None when they pass, else the exit status, the refusal printed in one line.
    A hostfile's public addresses are warned about, as the window does."""
    from app.engine.distributed.preflight import check_split

    try:
        check_split(
            args.main,
            args.draft,
            ranks=args.ranks,
            hostfile=args.hostfile,
            force=bool(getattr(args, "force", False)),
            warn=lambda words: print(f"warning: {words}", file=sys.stderr, flush=True),
        )
    except (ValueError, OSError) as exc:  # SplitRefused and HostfileError are ValueErrors
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return None


def run(args: argparse.Namespace, sampling: SamplingParams, colour: bool) -> int:
    """One answer from the split main; `refused` has passed."""
    from app.engine.decoding.events import EngineError, GenerationFinished, Provenance, TokenEvent
    from app.engine.decoding.templates.chat import TemplateError
    from app.engine.distributed.session import RanksLost, ShardedPair
    from app.engine.distributed.wire import PolicySpec

    try:
        pair = ShardedPair(args.main, args.draft, placement(args), floor_s=args.rank_timeout)
    except (RanksLost, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # where each rank runs, so a lost one can be found (and, in tests, stopped)
    where = ", ".join(f"rank {r.rank}: {r.host} pid {r.pid}" for r in pair.ranks)
    print(f"[{len(pair.ranks)} ranks] {where}", file=sys.stderr, flush=True)
    try:
        messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
            {"role": "user", "content": args.prompt}
        ]
        ids = pair.render(messages)
        mode = PolicySpec("fixed" if args.draft else "off", args.k)
        finished: GenerationFinished | None = None
        failure: str | None = None
        for event in pair.generate(ids, mode, sampling, args.max_tokens):
            if isinstance(event, TokenEvent):
                drafted = colour and event.provenance is not Provenance.MAIN
                sys.stdout.write(f"\x1b[32m{event.text}\x1b[0m" if drafted else event.text)
                sys.stdout.flush()
            elif isinstance(event, GenerationFinished):
                finished = event
            elif isinstance(event, EngineError) and event.kind == "notice":
                print(f"\n[{event.kind}] {event.message}", file=sys.stderr)
            elif isinstance(event, EngineError):
                failure = event.message
    except (RanksLost, TemplateError, ValueError) as exc:
        failure = str(exc)
    except BaseException:  # stopped (Ctrl-C, a signal): end the ranks now, not after a goodbye
        pair.stop_now()
        raise
    finally:
        pair.close()
    if finished is None or failure is not None:
        sys.stdout.write("\n")
        print(f"error: {failure or 'the answer did not finish'}", file=sys.stderr)
        return 1
    sys.stdout.write(finished.tail + "\n")
    s = finished.stats
    print(
        f"[{finished.reason}] {s.tokens} tokens, {s.tokens_per_second:.1f} tok/s, "
        f"prefill {s.prefill_seconds:.2f}s, acceptance {s.acceptance:.0%} "
        f"({s.accepted}/{s.proposed}), {s.mean_accepted_per_round:.2f} accepted per round "
        f"[{len(pair.ranks)} ranks]",
        file=sys.stderr,
    )
    return 0
