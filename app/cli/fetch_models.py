"""`python -m app fetch-models`: assemble the real-model GGUF fixtures and import them (idempotent)."""

from __future__ import annotations

import argparse
import sys

from app.engine.gguf.fixtures import FIXTURES, fetch, mlx_path
from app.engine.library.precision import default_bits, default_words


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--models",
        default=",".join(FIXTURES),
        help=f"comma-separated subset of {', '.join(FIXTURES)} (default: all)",
    )
    parser.add_argument(
        "--bits",
        default=str(default_bits()),
        help=f"imports to make, comma-separated, e.g. 4,16 ({default_words()})",
    )
    parser.add_argument("--no-import", action="store_true", help="only download and assemble the GGUFs")


def run(args: argparse.Namespace) -> int:
    keys = [k.strip() for k in args.models.split(",") if k.strip()]
    unknown = [k for k in keys if k not in FIXTURES]
    if unknown:
        print(f"fetch-models: unknown model(s) {unknown}; known: {list(FIXTURES)}", file=sys.stderr)
        return 2
    from app.engine.gguf.child import ImportFailed, ImportFinished, run_import

    def log(message: str) -> None:
        print(message, file=sys.stderr)

    for key in keys:
        path = fetch(key, log=log)
        print(path)
        if args.no_import:
            continue
        for bits in (int(b) for b in args.bits.split(",") if b.strip()):
            out = mlx_path(key, bits)
            if (out / "config.json").is_file():
                print(out)
                continue
            for event in run_import(path, out, bits):
                if isinstance(event, ImportFailed):
                    print(f"fetch-models: importing {key} failed: {event.message}", file=sys.stderr)
                    return 1
                if isinstance(event, ImportFinished):
                    log(
                        f"{key}: {bits}-bit import in {event.seconds:.1f} s, "
                        f"peak {event.peak_rss_bytes / 2**30:.2f} GiB"
                    )
                    print(out)
    return 0
