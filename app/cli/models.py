"""`python -m app models [--json]`: the library as the picker sees it, with roles and drafts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the listing as JSON")
    parser.add_argument(
        "--folder",
        action="append",
        default=[],
        metavar="DIR",
        help="also scan this folder, like a folder added in the window's settings (repeatable)",
    )
    parser.add_argument(
        "--models-dir", metavar="DIR", help="SpecChat's own model folder (default: the usual one)"
    )
    parser.add_argument("--no-hub", action="store_true", help="leave out the Hugging Face cache")
    parser.add_argument("--no-lmstudio", action="store_true", help="leave out LM Studio's folder")
    parser.add_argument(
        "--no-fetched", action="store_true", help="leave out the models `fetch-models` imported"
    )


def run(args: argparse.Namespace) -> int:
    from app.engine.library.discovery import Sources, default_sources, scan_library
    from app.engine.library.roles import check_drafts, describe_library
    from app.engine.library.vocab import Vocabulary

    base = default_sources(tuple(Path(p).expanduser() for p in args.folder))
    sources = Sources(
        hub_cache=base.hub_cache,
        lmstudio=None if args.no_lmstudio else base.lmstudio,
        specchat=Path(args.models_dir).expanduser() if args.models_dir else base.specchat,
        extra=base.extra,
        use_hub=not args.no_hub,
        fetched=None if args.no_fetched else base.fetched,
    )
    facts, ggufs = scan_library(sources)
    read: dict[Path, Vocabulary] = {}  # every main's check reads the same tokenizers
    verdicts = {f.path: check_drafts(f, facts, vocabularies=read) for f in facts if f.usable}
    listing = describe_library(facts, verdicts)
    if args.json:
        print(json.dumps({"models": listing, "gguf_files": [str(g.path) for g in ggufs]}, indent=2))
        return 0
    if not listing:
        hint = (
            f"{len(ggufs)} GGUF file(s) can be imported with `python -m app import-gguf FILE`."
            if ggufs
            else "Download one from the window's model picker, or import a GGUF file"
            " with `python -m app import-gguf FILE`."
        )
        print(f"No models found. {hint}")
        return 0
    for m in listing:
        params = f"{m['parameters'] / 1e6:.0f}M params" if m["parameters"] else "? params"
        ctx = f"{m['context_length']} tokens" if m["context_length"] else "? tokens"
        print(f"{m['name']}  [suggested: {m['suggested_role']}]")
        print(f"  {m['path']}")
        print(f"  {m['family']} · {params} · {m['quantization'] or '? bits'} · context {ctx}")
        for d in m["compatible_drafts"]:
            print(f"  draft: {d}")
        for h in m["hidden_drafts"]:
            print(f"  hidden: {h['path']}: {h['reason']}")
    return 0
