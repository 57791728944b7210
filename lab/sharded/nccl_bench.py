"""Plain and speculative greedy decoding of a main sharded over several GPUs (or CPU ring ranks).

Every rank builds the same toy pair (toy_pair.py: real Qwen2.5 shapes, random weights, a chosen
greedy agreement between main and draft) from a seed, shards the main with mlx-lm's
`model.shard(group)`, keeps the draft whole and runs the same loops; rank 0 prints the table.
Run it with one process for the one-device baseline (`--json` saves its tokens) and with
`--ranks N` (or under `mlx.launch`) for the sharded run (`--baseline` compares with that file).
Communication per pass is timed two ways: the same pass with every all_sum removed (the
difference is what the collectives cost inside a forward), and the pass's all_sums alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx

from app.engine.measure.toy_shapes import FIRST_TEXT_ID, PAIRS, pair_spec
from lab.sharded.local_launch import launch
from lab.sharded.shard_model import speculative_tok_s
from lab.sharded.tp_decode import (
    all_sum_ms,
    first_divergence,
    pass_ms,
    plain_decode,
    speculative_decode,
)
from lab.sharded.tp_models import (
    BuiltPair,
    SplitError,
    build_sharded_pair,
    check_splits,
    restore,
    without_all_sums,
)

COLUMNS = (
    "mode",
    "cold tok/s",
    "tok/s",
    "pass ms",
    "no-comm ms",
    "comm ms",
    "all_sum ms",
    "comm share",
    "acc/round",
    "speedup",
    "vs plain",
)
MODULE = "lab.sharded.nccl_bench"
LAUNCH_ENV = ("MLX_RANK", "MLX_HOSTFILE", "MLX_WORLD_SIZE")


class SetupError(RuntimeError):
    """The distributed backend or the device is not usable; the message says what to check."""


def init_group(backend: str) -> mx.distributed.Group | None:
    """None when not started by a launcher (the one-device baseline), else the checked group."""
    if not any(name in os.environ for name in LAUNCH_ENV):
        return None
    if not mx.distributed.is_available(backend):
        raise SetupError(f"this MLX build has no '{backend}' distributed backend")
    try:
        group = mx.distributed.init(strict=True, backend=backend)
    except RuntimeError as error:
        hint = " (is libnccl on LD_LIBRARY_PATH?)" if backend == "nccl" else ""
        raise SetupError(f"the '{backend}' backend did not initialise{hint}: {error}") from error
    return group


@dataclass
class PassCosts:
    tokens: int
    pass_ms: float
    local_ms: float | None  # the same pass with its all_sums removed
    all_sum_ms: float | None  # the pass's all_sums alone


def measure_pass(
    pair: BuiltPair,
    group: mx.distributed.Group | None,
    prompt: list[int],
    tokens: int,
    repeats: int,
) -> PassCosts:
    full = pass_ms(pair.main, prompt, tokens, repeats)
    if group is None or not pair.sharded:
        return PassCosts(tokens, full, None, None)
    saved = without_all_sums(pair.main)
    try:
        local = pass_ms(pair.main, prompt, tokens, repeats)
    finally:
        restore(pair.main, saved)
    shape = pair.spec.main
    dtype = getattr(mx, pair.spec.dtype)
    isolated = all_sum_ms(group, 2 * shape.layers, (1, tokens, shape.hidden), dtype, repeats)
    return PassCosts(tokens, full, local, isolated)


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.device == "cpu":
        mx.set_default_device(mx.cpu)
    group = init_group(args.backend)
    pair = build_sharded_pair(args.pair, args.agreement, args.seed, group, args.bits)
    # the main's own text: it continues along its cycle, the draft follows at the agreement
    prompt = pair.cycle(FIRST_TEXT_ID, args.prompt_len)
    expected = pair.cycle(int(pair.successor[prompt[-1]]), args.tokens)
    draft_ms = pass_ms(pair.draft, prompt, 1, args.repeats)
    # the second run repeats the first's shapes exactly: its rate leaves out first-seen-shape costs
    plain_cold = plain_decode(pair.main, prompt, args.tokens)
    plain = plain_decode(pair.main, prompt, args.tokens)
    plain_tok_s = (len(plain.tokens) - 1) / plain.seconds
    spec = pair.spec
    result: dict[str, Any] = {
        "pair": spec.name,
        "main": spec.main.name,
        "draft": spec.draft.name,
        "bits": spec.bits,
        "dtype": spec.dtype,
        "agreement": args.agreement,
        "world": group.size() if group else 1,
        "device": str(mx.default_device()),
        "draft_step_ms": draft_ms,
        "plain": {
            "tokens": plain.tokens,
            "margins": plain.margins,
            "follows_cycle": plain.tokens == expected,
            "tok_s": plain_tok_s,
            "cold_tok_s": (len(plain_cold.tokens) - 1) / plain_cold.seconds,
            "pass": vars(measure_pass(pair, group, prompt, 1, args.repeats)),
        },
        "speculative": {},
    }
    for k in args.k:
        cold = speculative_decode(pair.main, pair.draft, prompt, args.tokens, k)
        timed = speculative_decode(pair.main, pair.draft, prompt, args.tokens, k)
        produced = len(timed.tokens) - 1
        result["speculative"][str(k)] = {
            "tokens": timed.tokens,
            "tok_s": produced / timed.seconds,
            "cold_tok_s": produced / cold.seconds,
            "speedup": produced / timed.seconds / plain_tok_s,
            "rounds": timed.rounds,
            "accepted_per_round": timed.accepted / max(timed.rounds, 1),
            "acceptance": timed.accepted / max(timed.rounds * k, 1),
            "diverges_at": first_divergence(plain.tokens, timed.tokens),
            "pass": vars(measure_pass(pair, group, prompt, k + 1, args.repeats)),
        }
    if args.baseline:
        result["vs_baseline"] = compare(result, json.loads(Path(args.baseline).read_text()))
    return result


def compare(result: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """Where this run's greedy tokens first leave the baseline's, and how near a tie it was."""
    ours, theirs = result["plain"]["tokens"], baseline["plain"]["tokens"]
    at = first_divergence(ours, theirs)
    out: dict[str, Any] = {
        "baseline_world": baseline["world"],
        "plain_diverges_at": at,
        "compared": min(len(ours), len(theirs)),
    }
    if at is not None:
        out["baseline_margin"] = baseline["plain"]["margins"][at]
        out["margin"] = result["plain"]["margins"][at]
    for k, spec in result["speculative"].items():
        out[f"spec_k{k}_diverges_at"] = first_divergence(spec["tokens"], theirs)
    return out


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _row(mode: str, run: dict[str, Any], acc: str, speedup: str, agrees: str) -> list[str]:
    costs = run["pass"]
    full, local, isolated = costs["pass_ms"], costs["local_ms"], costs["all_sum_ms"]
    comm = None if local is None else full - local
    share = None if comm is None else comm / full
    return [
        mode,
        f"{run['cold_tok_s']:.1f}",
        f"{run['tok_s']:.1f}",
        f"{full:.2f}",
        _cell(local, ".2f"),
        _cell(comm, ".2f"),
        _cell(isolated, ".2f"),
        _cell(share, ".0%"),
        acc,
        speedup,
        agrees,
    ]


def format_report(result: dict[str, Any]) -> str:
    rows = [list(COLUMNS), _row("plain", result["plain"], "-", "-", "-")]
    for k, spec in result["speculative"].items():
        agrees = "same" if spec["diverges_at"] is None else f"differs at {spec['diverges_at']}"
        acc = f"{spec['accepted_per_round']:.2f}"
        rows.append(_row(f"spec k={k}", spec, acc, f"{spec['speedup']:.2f}x", agrees))
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    follows = "follows" if result["plain"]["follows_cycle"] else "LEAVES"
    precision = result["dtype"] if result["bits"] == 16 else f"{result['bits']}-bit"
    lines = [
        f"pair {result['pair']}: main {result['main']} {precision} over "
        f"{result['world']} rank(s) on {result['device']}; draft {result['draft']} whole on every rank, "
        f"{result['draft_step_ms']:.2f} ms a step; agreement {result['agreement']:g}; "
        f"plain {follows} the main's built cycle",
        *("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows),
    ]
    plain_ms = result["plain"]["pass"]["pass_ms"]
    draft_ms = result["draft_step_ms"]
    for k, spec in result["speculative"].items():
        verify = spec["pass"]["pass_ms"]
        projected = ", ".join(
            f"a={a:g}: {speculative_tok_s(verify, draft_ms, a, int(k)):.1f}" for a in (0.6, 0.8)
        )
        measured_a = spec["acceptance"]
        at_measured = speculative_tok_s(verify, draft_ms, measured_a, int(k))
        lines.append(
            f"k={k}: verify pass {verify / plain_ms:.2f}x a plain pass; tok/s projected from pass times "
            f"at acceptance {projected}; at the measured a={measured_a:.2f}: {at_measured:.1f} "
            f"(measured {spec['tok_s']:.1f})"
        )
    if "vs_baseline" in result:
        vs = result["vs_baseline"]
        if vs["plain_diverges_at"] is None:
            lines.append(
                f"plain tokens equal the {vs['baseline_world']}-rank baseline's ({vs['compared']} compared)"
            )
        else:
            lines.append(
                f"plain tokens leave the {vs['baseline_world']}-rank baseline's at {vs['plain_diverges_at']}: "
                f"top-1 minus top-2 logit there {vs['baseline_margin']:.4f} (baseline), {vs['margin']:.4f} (here)"
            )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", choices=list(PAIRS), default="1.5b-bf16", help="toy_shapes pair")
    parser.add_argument("--bits", type=int, choices=(4, 16), help="override the pair's precision")
    parser.add_argument("--agreement", type=float, default=0.9, help="draft's greedy agreement")
    parser.add_argument("--backend", default="nccl", help="nccl on GPUs, ring for CPU ranks")
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--k", type=lambda s: [int(x) for x in s.split(",")], default=[3, 5])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per pass shape")
    parser.add_argument("--ranks", type=int, default=1, help="start this many local ranks itself")
    parser.add_argument("--timeout", type=float, default=570.0, help="seconds before --ranks stops them")
    parser.add_argument("--json", type=Path, help="rank 0 writes its result here")
    parser.add_argument("--baseline", type=Path, help="a one-device --json file to compare with")
    args = parser.parse_args(argv)
    if args.prompt_len < max(args.k) + 1:
        parser.error("--prompt-len must be at least the largest k + 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.ranks > 1 and not any(name in os.environ for name in LAUNCH_ENV):
            # a main that cannot split is refused before any rank starts building it
            check_splits(pair_spec(args.pair, args.bits), args.ranks)
            argv = sys.argv[1:] if argv is None else list(argv)
            return launch(MODULE, argv, args.ranks, args.backend, args.timeout)
        result = run(args)
    except (SetupError, SplitError) as error:
        print(f"nccl_bench: {error}", file=sys.stderr)
        return 2
    rank = int(os.environ.get("MLX_RANK", "0"))
    if rank == 0:
        print(format_report(result), flush=True)
        if args.json:
            args.json.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
