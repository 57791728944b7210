"""`python -m lab.replay`: plain, fixed k and adaptive replayed over recorded answers under a
cost model (this machine's, measured, or a named shape), side by side, without timing noise."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when the command runs, so --help starts without MLX
    from lab.replay.simulate import CostModel, ReplayResult, Trace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--main", help="main model (MLX folder or hub repo id); not needed with --traces")
    parser.add_argument("--draft", help="draft model; not needed with --traces")
    parser.add_argument(
        "--force", action="store_true", help="record with a draft even if it is not compatible with the main"
    )
    parser.add_argument(
        "--traces",
        metavar="JSON",
        help="replay answers recorded earlier (--save) instead of recording; several files "
        "comma-separated are replayed as one set (measured costs: the first file's)",
    )
    parser.add_argument("--save", metavar="JSON", help="write the recorded answers and measured costs")
    parser.add_argument(
        "--prompts", default="builtin", help="'builtin' or a JSON file of {id, class, prompt}"
    )
    parser.add_argument("--classes", help="only these prompt classes (comma-separated)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--k", default="1,2,3,4,6,8", help="fixed draft lengths to compare")
    parser.add_argument(
        "--costs",
        default="measured,compute,bandwidth",
        help=(
            "cost models: 'measured' (this machine, with the models), 'compute', 'bandwidth', "
            "'gpu-4bit', 'flat-14b', 'flat-14b-spells'"
        ),
    )
    parser.add_argument("--noise", type=float, default=0.1, help="log-normal spread of every simulated pass")
    parser.add_argument("--seeds", type=int, default=3, help="noisy replays per cost model")
    parser.add_argument(
        "--rotate",
        action="store_true",
        help="replay the answers once starting from each of them, so that the one which pays "
        "for exploring a new pair is not always the same",
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an adaptive controller setting (ControllerSettings) other than its default, for comparing "
        "one replay with another; repeat for several",
    )


def _settings(specs: list[str]) -> dict[str, object]:
    """'margin=1.1', 'probe_k=3' ... as ControllerSettings keyword arguments."""
    from dataclasses import fields

    from app.engine.policy.settings import ControllerSettings

    kinds = {f.name: f.type for f in fields(ControllerSettings)}
    out: dict[str, object] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        if not sep or name not in kinds:
            raise ValueError(f"--setting {spec!r}: expected NAME=VALUE, NAME one of {', '.join(kinds)}")
        kind = str(kinds[name])
        try:
            out[name] = float(text) if kind.startswith("float") else int(text)
        except ValueError:
            raise ValueError(f"--setting {spec!r}: {name} takes {kind.replace('|', 'or')}") from None
    return out


def _record(args: argparse.Namespace) -> tuple[list[Trace], CostModel | None]:
    from app.engine.decoding.templates.chat import format_chat
    from app.engine.library.pairing import load_checked_pair
    from app.engine.measure.bench import load_prompts
    from lab.replay.recording import measure_costs, record_trace

    if not args.main or not args.draft:
        raise ValueError("recording needs --main and --draft (or replay saved answers with --traces)")
    prompts = load_prompts(args.prompts, args.classes)
    pair = load_checked_pair(args.main, args.draft, force=args.force)
    traces: list[Trace] = []
    last: list[int] = []
    for p in prompts:
        last = format_chat(pair.tokenizer, [{"role": "user", "content": p.text}])
        traces.append(record_trace(pair, last, args.max_tokens, label=p.id))
        hit = sum(traces[-1].draft_hits) / max(len(traces[-1].answer), 1)
        print(
            f"recorded {p.id}: {len(traces[-1].answer)} tokens, draft right on {hit:.0%}",
            file=sys.stderr,
            flush=True,
        )
    return traces, measure_costs(pair, last) if "measured" in args.costs else None


def _load(spec: str) -> tuple[list[Trace], CostModel | None]:
    """The answers of every comma-separated file, in order, and the first measured costs found."""
    from lab.replay.simulate import load_traces

    traces: list[Trace] = []
    measured: CostModel | None = None
    for name in spec.split(","):
        more, costs = load_traces(Path(name))
        traces += more
        measured = measured or costs
    return traces, measured


def _table(traces: list[Trace], results: dict[str, list[ReplayResult]], name: str) -> list[str]:
    """Per class and overall: each variant's speed over plain, and adaptive's share of the best fixed k."""
    classes: dict[str, list[int]] = {}
    for i, t in enumerate(traces):
        classes.setdefault(t.label.split("-")[0] or "all", []).append(i)
    classes["all"] = list(range(len(traces)))
    fixed = [m for m in results if m.startswith("fixed")]
    lines = [
        f"{name + ':':<11}"
        + "  ".join(f"{m:>8}" for m in ["plain", *fixed])
        + "  adaptive  /best  lookup  worst prompt (lookup)  worst share of its best fixed"
    ]
    for cls, idx in classes.items():

        def speed(m: str) -> float:
            return sum(results[m][i].tokens for i in idx) / sum(results[m][i].seconds for i in idx)  # noqa: B023 - called in this iteration

        def worst(m: str) -> float:
            return min(results[m][i].tokens_per_second / results["plain"][i].tokens_per_second for i in idx)  # noqa: B023

        def worst_share(m: str) -> float:  # the oracle per answer: its own best fixed k, known exactly
            return min(
                results[m][i].tokens_per_second / max(results[f][i].tokens_per_second for f in fixed)
                for i in idx  # noqa: B023
            )

        plain = speed("plain")
        best = max(speed(m) for m in fixed)
        cells = [f"{plain:8.1f}"] + [f"{speed(m) / plain:8.2f}" for m in fixed]
        lines.append(
            f"{cls:<11}"
            + "  ".join(cells)
            + f"  {speed('adaptive') / plain:8.2f}  {speed('adaptive') / best:5.2f}"
            + f"  {speed('lookup') / plain:6.2f}"
            + f"  {worst('adaptive'):12.2f} ({worst('lookup'):.2f})"
            + f"  {worst_share('adaptive'):30.2f}"
        )
    return lines


def _policy_time(results: dict[str, list[ReplayResult]]) -> str:
    """Each policy's own Python time per round (choose, observe, snapshot), measured on this
    machine while replaying: the decode loop pays it between the main's passes, where a fast
    step (a small model on a GPU: a few milliseconds) makes it a share of the speed."""
    first_fixed = [m for m in results if m.startswith("fixed")][:1]  # every fixed k costs the same
    cells = []
    for m in ["plain", *first_fixed, "adaptive", "lookup"]:
        if m in results:
            rounds = sum(r.rounds for r in results[m])
            cells.append(f"{m} {1e6 * sum(r.policy_seconds for r in results[m]) / max(rounds, 1):.0f}")
    return "policy time per round, microseconds: " + ", ".join(cells)


def run(args: argparse.Namespace) -> int:
    from app.engine.decoding.loading import ModelLoadError
    from lab.replay.simulate import CostModel, run_policies, save_traces

    try:
        traces, measured = _load(args.traces) if args.traces else _record(args)
        ks = tuple(int(k) for k in str(args.k).split(","))
        settings = _settings(args.setting)
        models = []
        for name in args.costs.split(","):
            if name == "measured":
                if measured is None:
                    raise ValueError(
                        "no measured costs: record with the models, or drop 'measured' from --costs"
                    )
                models.append(measured)
            else:
                models.append(CostModel.shaped(name))
    except (ModelLoadError, ValueError, TypeError, OSError, KeyError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.save:
        save_traces(Path(args.save), traces, measured)
    hits = sum(sum(t.draft_hits) for t in traces) / max(sum(len(t.answer) for t in traces), 1)
    print(
        f"{len(traces)} answers, {sum(len(t.answer) for t in traces)} tokens, draft right on {hits:.0%}; "
        f"noise {args.noise}, {args.seeds} seeds{', every answer first in turn' if args.rotate else ''}; "
        "speeds relative to plain, tok/s of plain is simulated"
    )
    from app.engine.policy.settings import ControllerSettings

    try:
        chosen = ControllerSettings(**settings)  # type: ignore[arg-type]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    variants: dict[str, dict[str, Any]] = {
        "adaptive": {"settings": chosen},
        "lookup": {"use_draft": False, "settings": chosen},
    }
    for costs in models:
        merged: dict[str, list[ReplayResult]] = {}
        for seed in range(args.seeds if args.noise else 1):
            for start in range(len(traces) if args.rotate else 1):
                order = traces[start:] + traces[:start]
                for m, rs in run_policies(
                    order, costs.with_noise(args.noise), ks, seed=seed, adaptive=variants
                ).items():
                    rs = rs[len(traces) - start :] + rs[: len(traces) - start]  # back in the answers' order
                    merged[m] = [a.plus(b) for a, b in zip(merged[m], rs)] if m in merged else rs
        print("\n".join(_table(traces, merged, costs.name)))
        print(_policy_time(merged))
        print()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Set MLX up as `python -m app` does (before MLX is imported), then run the replay."""
    from app.engine.blas import ensure_blas
    from app.engine.kernel_cache import keep_compiled_kernels, shape_generic_attention

    ensure_blas()
    keep_compiled_kernels()
    shape_generic_attention()
    parser = argparse.ArgumentParser(prog="python -m lab.replay", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
