"""`python -m app import-gguf FILE`: convert a GGUF into an MLX model folder (in a child process)."""

from __future__ import annotations

import argparse
import sys

from app.engine.gguf.child import ImportFailed, ImportFinished, ImportProgress, run_import
from app.engine.library.precision import default_bits, default_words


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the .gguf file to import")
    parser.add_argument(
        "--out",
        help="output folder (default: <name>-<bits>bit in SpecChat's models folder, where the app lists it)",
    )
    parser.add_argument(
        "--bits",
        type=int,
        choices=(4, 8, 16),
        default=default_bits(),
        help="4 or 8: float tensors quantized to this many bits (group 64), quantized tensors keep "
        "the file's own integers (group 32; Q6_K at 8 bits); 16: unquantized, bfloat16 "
        "(float32 on Linux without a GPU when a fast BLAS is found: it runs faster there) "
        f"({default_words()})",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")


def run(args: argparse.Namespace) -> int:
    stage = None
    for event in run_import(args.file, args.out or None, args.bits, overwrite=args.overwrite):
        if isinstance(event, ImportProgress):
            if event.stage != stage or event.done == event.total:
                stage = event.stage
                pct = 100 * event.done // max(event.total, 1)
                print(f"[{event.stage}] {pct:3d}% {event.message}", file=sys.stderr)
        elif isinstance(event, ImportFinished) and event.existing:
            print("already in the library: nothing to import", file=sys.stderr)
            print(event.path)
            return 0
        elif isinstance(event, ImportFinished):
            print(
                f"imported in {event.seconds:.1f} s, peak memory {event.peak_rss_bytes / 2**30:.2f} GiB",
                file=sys.stderr,
            )
            print(event.path)
            return 0
        elif isinstance(event, ImportFailed):
            print(f"import-gguf: {event.kind}: {event.message}", file=sys.stderr)
            return 2 if event.kind in ("invalid", "refused") else 1
    return 1
