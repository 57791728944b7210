"""`python -m app serve`: the pair behind an OpenAI-compatible API on this computer.

The pair loads in an engine worker first (with progress lines, as `generate` shows), then the
server answers from its queue until Ctrl-C or SIGTERM; one log line per served request."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.options import add_model_arguments, add_sampling_arguments, sampling_from_args

if TYPE_CHECKING:
    from app.engine.protocol import WorkerMessage
    from app.server.config import ServerConfig
    from app.server.records import LibraryModel, ServedRecord

LOAD_TIMEOUT = 3600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    add_sampling_arguments(parser)  # the defaults for what a request leaves out
    parser.add_argument(
        "--speculation",
        choices=("off", "fixed", "adaptive", "lookup"),
        default="adaptive",
        help="how requests that name none speculate (default adaptive)",
    )
    parser.add_argument("--k", type=int, default=4, help="draft length for --speculation fixed (1-16)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this computer only)"
    )
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    parser.add_argument(
        "--api-key", help="require 'Authorization: Bearer KEY' (needed to listen beyond this computer)"
    )
    parser.add_argument(
        "--cors",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let web pages of ORIGIN call the API (repeatable)",
    )
    parser.add_argument(
        "--max-queue", type=int, default=8, help="requests waiting or running at once (default 8)"
    )
    parser.add_argument("--max-tokens-cap", type=int, default=8192, help="most tokens one answer may ask for")
    parser.add_argument("--no-library", action="store_true", help="list only the loaded pair in /v1/models")


def run(args: argparse.Namespace) -> int:
    from app.engine.protocol import SpeculationSettings
    from app.server.config import ConfigRefused, ServerConfig

    if not 1 <= args.k <= 16:
        print("error: --k must be from 1 to 16", file=sys.stderr)
        return 2
    config = ServerConfig(
        host=args.host,
        port=args.port,
        api_key=args.api_key or None,
        cors_origins=tuple(args.cors),
        max_queue=args.max_queue,
        max_tokens_cap=args.max_tokens_cap,
        speculation=SpeculationSettings(args.speculation, k=args.k),
        sampling=sampling_from_args(args),
    )
    try:  # before any model loads: a refused address costs no wait
        config.check()
    except ConfigRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _serve(args, config)


class _Served:
    """What the running server reads: the loaded pair, the library, the plain speed."""

    def __init__(self, main: str, draft: str | None) -> None:
        self.main, self.draft = main, draft
        self.library: tuple[LibraryModel, ...] = ()
        self.plain: float | None = None


def _serve(args: argparse.Namespace, config: ServerConfig) -> int:
    from app.cli.stopping import Stopped, stopped_by_signals
    from app.engine.protocol import (
        BaselineMeasured,
        EngineError,
        ErrorKind,
        LoadPair,
        PairLoaded,
        WarmUpProgress,
    )
    from app.engine.worker import remembering_worker
    from app.server.records import ModelsInfo
    from app.server.runner import ServerRunner, ServerStartError

    loaded = threading.Event()
    outcome: list[PairLoaded | EngineError] = []
    served = _Served(args.main, args.draft)

    def emit(message: WorkerMessage) -> None:
        event = message.event
        if isinstance(event, WarmUpProgress) and event.total:
            print(f"warming up {event.done}/{event.total}", file=sys.stderr)
        elif isinstance(event, PairLoaded) or (
            isinstance(event, EngineError) and event.kind is not ErrorKind.NOTICE
        ):
            if not loaded.is_set():
                outcome.append(event)
                loaded.set()
        elif isinstance(event, BaselineMeasured) and event.tok_s:
            served.plain = event.tok_s
        elif isinstance(event, EngineError):
            print(f"[{event.kind}] {event.message}", file=sys.stderr)

    worker = remembering_worker(emit)  # adaptive keeps what it learnt about the pair across starts
    worker.start()
    runner: ServerRunner | None = None
    try:
        with stopped_by_signals():
            print(f"loading {args.main}" + (f" + {args.draft}" if args.draft else ""), file=sys.stderr)
            worker.submit(LoadPair(args.main, args.draft))
            loaded.wait(LOAD_TIMEOUT)
            result = outcome[0] if outcome else EngineError("the pair did not load in time")
            if isinstance(result, EngineError):
                print(f"error: {result.plain or result.message}", file=sys.stderr)
                return 2
            if result.speculation_refusal:
                print(f"note: answers are plain: {result.speculation_refusal}", file=sys.stderr)
            if not args.no_library:
                threading.Thread(target=_scan_library, args=(served,), daemon=True).start()

            def models() -> ModelsInfo:
                return ModelsInfo(served.main, served.draft, served.library, served.plain)

            runner = ServerRunner(config, worker, models, _print_record)
            try:
                url = runner.start()
            except ServerStartError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            draft = f" (+ {Path(args.draft).name})" if args.draft else ""
            print(f"serving {Path(args.main).name}{draft} at {url}", flush=True)
            if config.api_key:
                print("clients must send the API key: Authorization: Bearer <key>", file=sys.stderr)
            while True:
                time.sleep(3600)
    except Stopped as stop:
        print(stop.line("the server was stopped"), file=sys.stderr)
        return stop.code
    finally:
        if runner is not None:
            runner.stop()
        worker.shutdown(5.0)


def _print_record(record: ServedRecord) -> None:
    """One line per served request, on stdout (the server's own log)."""
    speedup = f", {record.speedup_vs_plain:.2f}x plain" if record.speedup_vs_plain else ""
    clock = time.strftime("%H:%M:%S", time.localtime(record.time))
    print(
        f"{clock} {record.client} {record.endpoint} {record.status} {record.finish_reason}: "
        f"{record.prompt_tokens} prompt + {record.tokens} tokens, {record.tokens_per_second:.1f} tok/s"
        f"{speedup}, accepted {record.accepted}/{record.proposed}",
        flush=True,
    )


def _scan_library(served: _Served) -> None:
    """The library's models with their suggested roles, for /v1/models (a scan takes a while)."""
    from app.engine.library.discovery import default_sources, scan_library
    from app.server.records import library_models

    try:
        facts, _ = scan_library(default_sources())
    except Exception:
        return
    served.library = library_models(facts)
