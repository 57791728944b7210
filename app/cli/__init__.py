"""Command line: no arguments starts the GUI, a subcommand runs a tool.

Each tool lives in its own module under `app.cli` exposing `add_arguments(parser)` and
`run(args) -> int`; modules are imported only when their command runs, so `--help` and the GUI
start without loading MLX.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from app.cli.utf8_args import not_utf8_refusal

# command name -> (module under app.cli, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "toy-models": ("toy", "write a deterministic tiny main/draft model pair"),
    "generate": ("generate", "generate an answer from the command line"),
    "bench": ("bench", "benchmark plain, mlx-lm and SpecChat speculative decoding side by side"),
    "import-gguf": ("gguf_import", "import a GGUF model file into an MLX model folder"),
    "fetch-models": ("fetch_models", "fetch the real-model GGUF fixtures and import them"),
    "agreement": (
        "agreement",
        "exact-match against residual acceptance when sampling, computed from both models' distributions",
    ),
    "compat": ("compat", "check whether a draft model may speculate for a main model, and why"),
    "models": ("models", "list the model library as the picker sees it: roles and compatible drafts"),
    "serve": ("serve", "serve the pair to other programs through an OpenAI-compatible local API"),
    "ui-bench": (
        "ui_bench",
        "time the chat window's stalls: a 2,000 tok/s stream, huge pastes and draft switches",
    ),
}
# commands one SpecChat runs on another machine, not listed in --help
HIDDEN: dict[str, tuple[str, str]] = {
    "probe-host": ("probe_host", "print one JSON line about this machine for the connection test"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app", description="SpecChat")
    parser.add_argument("--screenshot", metavar="DIR", help="render scripted GUI states to PNGs and exit")
    parser.add_argument(
        "--smoke-test",
        action="store_true",
        help="load a toy pair offscreen, generate, print SMOKE_OK and exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        command_parser.set_defaults(_module=module_name)
    for name, (module_name, help_text) in HIDDEN.items():
        sub.add_parser(name, description=help_text).set_defaults(_module=module_name)
    return parser


def main(argv: list[str] | None = None) -> int:
    from app.engine.blas import ensure_blas
    from app.engine.kernel_cache import keep_compiled_kernels, shape_generic_attention

    ensure_blas()  # before any command imports MLX: only then can MLX's CPU build use it
    keep_compiled_kernels()  # before the first GPU pass compiles anything
    shape_generic_attention()  # likewise: attention then builds nothing per shape
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # Parse once to find the command, then let its module add its own arguments. `--help` is
    # held back from that first pass: there the command's parser has no options to show yet.
    known, _ = parser.parse_known_args([a for a in argv if a not in ("-h", "--help")])
    if known.command is None:
        args = parser.parse_args(argv)
        if (refused := not_utf8_refusal(parser, args)) is not None:
            print(refused, file=sys.stderr)
            return 2
        if args.smoke_test:
            from app.smoke import run_smoke_test

            return run_smoke_test()
        if args.screenshot is not None:
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
            from app.devtools.screenshots import render_all

            return render_all(args.screenshot)
        from app.ui.launch import run_gui

        return run_gui()
    module = importlib.import_module(f"app.cli.{known._module}")
    sub_parser = argparse.ArgumentParser(
        prog=f"python -m app {known.command}", description={**COMMANDS, **HIDDEN}[known.command][1]
    )
    module.add_arguments(sub_parser)
    args = sub_parser.parse_args(argv[argv.index(known.command) + 1 :])
    if (refused := not_utf8_refusal(sub_parser, args)) is not None:
        print(refused, file=sys.stderr)
        return 2
    return _run_command(module, args)


def _run_command(module: object, args: argparse.Namespace) -> int:
    """Run a tool; a bad input ends in one line on stderr and status 2, never a traceback."""
    from app.engine.decoding.text.clean import clean_text

    # argv that is not UTF-8 arrives with surrogate escapes, which the tools would echo to a
    # terminal that cannot encode them; format_chat cleans what reaches the tokenizer itself.
    for name in ("prompt", "system"):
        if isinstance(getattr(args, name, None), str):
            setattr(args, name, clean_text(getattr(args, name)))
    try:
        return int(module.run(args) or 0)  # type: ignore[attr-defined]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        # imported only now, so a command that refuses early need not wait for MLX to import
        from app.engine.api import ModelLoadError, TemplateError

        if not isinstance(exc, (ModelLoadError, TemplateError)):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
