"""Real-shape speed check on a lent GPU, with no model files:
`python -m lab.gpu.gpu_bench --pair 7b-4bit --agreement 0.9 --tokens 128 --prompts 8`.

Builds a random pair at Qwen2.5's sizes in memory (toy_pair.py), warms it up as the app does
after loading, then per prompt decodes with plain, mlx-lm's plain and speculative loops, fixed k, adaptive
and plain again (plain2: the noise band), each timed from the outside as `bench` times them.
It prints each mode's speed against plain, the worst round against the median plain step, the
worst stall (a round beyond the median of its own kind, in plain steps), and the first answer
against later ones (what warm-up should make equal). `--repeat N` plays every mode N times per
prompt, in turn, and rates each by its N answers together: a shared host's stalls of several
plain steps, and its plain step drifting by up to 30% over minutes, moved plain's own second run
0.80-1.29x in single answers. The summary adds each prompt's median answer against the plain
answer timed beside it (robust to a stalled answer), and how the first answer of a controller
restored from this one's saved state (as the app loads a pair used before) compares.
After them, per fixed k, what a round costs against what it could (`report.format_costs`):
the draft's cost per token inside rounds against two floors measured in the same run (a
compiled single-token forward with no cache, and weight bytes over the bandwidth of a large
copy), the main's plain step and verify pass against its own, the rounds' wall time against
their passes (as timed inside the rounds, and timed alone at the same sizes), and the speed
Leviathan's formula predicts from the measured acceptance by position and pass costs against
the speed measured.
`--pair tiny` runs on a CPU in seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path

import mlx.core as mx

from app.engine.decoding.loading import ModelPair
from app.engine.decoding.policy import DraftPolicy
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.session import ChatSession
from app.engine.decoding.templates.chat import format_chat
from app.engine.features.prompts import BUILTIN_PROMPTS
from app.engine.features.timed_run import TimedRun, run_timed
from app.engine.kernel_cache import keep_compiled_kernels, shape_generic_attention
from app.engine.measure.bench import run_mlx_lm
from app.engine.measure.toy_pair import build_pair, measure_agreement
from app.engine.measure.toy_shapes import PAIRS
from app.engine.policy.modes import PairPolicies, SavedState, SpeculationMode, make_policy
from app.engine.policy.warmup import compile_pass_shapes
from lab.gpu.floors import measure_floors
from lab.gpu.passes_alone import draft_rounds, ready_session, time_passes_alone
from lab.gpu.report import (
    SLOW_STEPS,
    ModeRun,
    first_answer_text,
    fixed_costs,
    format_costs,
    format_summary,
    format_table,
    gaps,
    reduce_answers,
)


def _write_rounds(path: str, answers: Sequence[tuple[str, str, TimedRun]]) -> None:
    """Every answer's rounds as JSON, in the order they were timed: what a controller did and
    why, to read beside the table (a probe's cost, the speedups it predicted)."""
    rows = [
        {
            "prompt": prompt,
            "mode": mode,
            "seconds": run.answer_seconds,
            "rounds": [asdict(r) for r in run.log],
        }
        for prompt, mode, run in answers
    ]
    Path(path).write_text(json.dumps(rows))


def mode_names(ks: Sequence[int]) -> list[str]:
    """plain first (the reference), plain2 last (so drift over the prompt shows in it)."""
    return ["plain", "mlx_plain", "mlx_lm", *(f"fixed{k}" for k in ks), "adaptive", "plain2"]


def run_prompts(
    pair: ModelPair,
    prompts: Sequence[tuple[str, list[int]]],
    tokens: int,
    ks: Sequence[int],
    mlx_k: int,
    progress: Callable[[str], None] | None = None,
    only: Sequence[str] = (),
    done: Callable[[list[ModeRun]], None] | None = None,
    repeat: int = 1,
    keep: Callable[[str, str, TimedRun], None] | None = None,
    adaptive: PairPolicies | None = None,
    compiled: bool | None = None,
) -> list[list[ModeRun]]:
    """Every mode `repeat` times per prompt (all modes in turn, then again), prompts in order;
    no warm-up of its own (the caller's is the one measured). `keep(prompt, mode, run)` sees
    every answer of our own loop as it is timed."""
    greedy = SamplingParams()
    # one controller keeps its estimates across answers, as the app's does for a loaded pair
    adaptive = adaptive or PairPolicies()
    results = []
    modes = [m for m in mode_names(ks) if not only or m == "plain" or m in only]
    for name, ids in prompts:
        runs: dict[str, list[TimedRun]] = {m: [] for m in modes}
        for _ in range(repeat):
            for mode in modes:
                if progress:
                    progress(f"{name} {mode}")
                if mode == "mlx_lm":
                    runs[mode].append(run_mlx_lm(pair, ids, mlx_k, greedy, tokens))
                    continue
                if mode == "mlx_plain":  # mlx-lm's plain loop: what plain decoding must match
                    runs[mode].append(run_mlx_lm(replace(pair, draft=None), ids, 0, greedy, tokens))
                    continue
                policy: DraftPolicy
                if mode.startswith("plain"):
                    policy = make_policy(SpeculationMode.OFF)
                elif mode.startswith("fixed"):
                    policy = make_policy(SpeculationMode.FIXED, int(mode.removeprefix("fixed")))
                else:
                    policy = adaptive.policy(SpeculationMode.ADAPTIVE)
                runs[mode].append(run_timed(pair, ids, policy, greedy, tokens, compiled=compiled))
                if mode == "adaptive":  # saved after every answer, as the app saves it
                    adaptive.answered(SpeculationMode.ADAPTIVE)
                if keep is not None:
                    keep(name, mode, runs[mode][-1])
        plain = runs["plain"][0]
        step = statistics.median(gaps(plain.stamps)) if len(plain.stamps) > 1 else 0.0
        results.append([reduce_answers(name, m, r, runs["plain"], step) for m, r in runs.items()])
        if done is not None:  # each prompt's rows as soon as they exist: a cut-off run keeps them
            done(results[-1])
    return results


def restored_first_answers(
    pair: ModelPair,
    learnt: PairPolicies,
    saved: Mapping[SpeculationMode, SavedState],
    prompt: tuple[str, list[int]],
    tokens: int,
    turns: int = 8,
    keep: Callable[[str, str, TimedRun], None] | None = None,
    compiled: bool | None = None,
) -> float:
    """How much longer the first answer of a controller restored from `learnt`'s saved state
    (`saved`, where `learnt` saves it: through JSON, as the worker stores it) takes than
    `learnt`'s own answer to the same prompt timed beside it: the median over `turns`, each with a fresh copy of the state as the turn
    starts, which goes first in every other turn. That is the app's first answer after loading a
    pair it has used before, which explores nothing. Timed beside, not against the run's earlier
    answers: a shared host's speed moved 30% over a run, and the second of two answers ran 4%
    slower on this CPU. Eight turns: on a noisy H100 host one pair of answers moved 30%.
    `prompt` is (name, ids), as `run_prompts` takes them; `keep(name, mode, run)` sees every
    answer, its mode "restored" or "learnt"."""
    name, ids = prompt
    greedy, ratios = SamplingParams(), []
    for turn in range(turns):
        # saved as the turn starts, as the app saves after every answer: both know the same
        learnt.answered(SpeculationMode.ADAPTIVE)
        restored = PairPolicies(load={SpeculationMode.ADAPTIVE: saved[SpeculationMode.ADAPTIVE]}.get)
        policy = restored.policy(SpeculationMode.ADAPTIVE)
        if SpeculationMode.ADAPTIVE not in restored.restored:
            raise RuntimeError("the controller's saved state did not restore")
        timed = {}
        own = learnt.policy(SpeculationMode.ADAPTIVE)
        for mode, controller in (("restored", policy), ("learnt", own))[:: 1 if turn % 2 else -1]:
            run = run_timed(pair, ids, controller, greedy, tokens, compiled=compiled)
            timed[mode] = run.answer_seconds
            if keep is not None:
                keep(name, mode, run)
        ratios.append(timed["restored"] / timed["learnt"])
    return statistics.median(ratios)


def cost_lines(
    pair: ModelPair,
    prompt: list[int],
    answers: Sequence[tuple[str, str, TimedRun]],
    ks: Sequence[int],
    results: Sequence[Sequence[ModeRun]],
    trials: int = 5,
) -> list[str]:
    """The floors of both models and each fixed k's costs against them (`report.format_costs`),
    measured now, after the timed answers: the passes its rounds played timed alone at the
    start of `prompt`'s answer."""
    assert pair.draft is not None
    draft, main = measure_floors([pair.draft, pair.main], prompt[-1], trials)
    fixed = {f"fixed{k}": k for k in ks}
    by_mode: dict[str, list[TimedRun]] = {}
    for _, mode, run in answers:
        if mode in fixed:
            by_mode.setdefault(mode, []).append(run)
    played = draft_rounds(r for runs in by_mode.values() for run in runs for r in run.log)
    alone = time_passes_alone(ready_session(pair, prompt), played, trials)
    steps = [r.plain_step for runs in results for r in runs if r.mode == "plain" and r.plain_step > 0]
    costs = [fixed_costs(mode, fixed[mode], runs, alone) for mode, runs in by_mode.items()]
    step = statistics.median(steps) if steps else 0.0
    return format_costs(costs, draft, main, step, alone.verify[1])


def chat_prompts(pair: ModelPair, count: int) -> list[tuple[str, list[int]]]:
    """The first `count` built-in prompts (cycled), named and formatted for the pair's chat."""
    chosen = [BUILTIN_PROMPTS[i % len(BUILTIN_PROMPTS)] for i in range(count)]
    return [
        (f"{p.id}"[:10], format_chat(pair.tokenizer, [{"role": "user", "content": p.text}])) for p in chosen
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.gpu.gpu_bench", description=__doc__)
    parser.add_argument("--pair", choices=sorted(PAIRS), default="tiny")
    parser.add_argument("--bits", type=int, choices=(4, 16), help="override the pair's precision")
    parser.add_argument("--agreement", type=float, default=0.9, help="draft/main greedy agreement")
    parser.add_argument("--tokens", type=int, default=128, help="tokens per answer")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--ks", default="2,4,6", help="fixed draft lengths, comma-separated")
    parser.add_argument("--mlx-k", type=int, default=4, help="mlx-lm's draft length")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--modes", default="", help="only these modes, comma-separated (plain always runs first)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="answers per mode and prompt, in turn")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--compiled",
        choices=("auto", "on", "off"),
        default="auto",
        help="short passes through compiled graphs: where the warm-up measures them faster (auto), always, never",
    )
    parser.add_argument(
        "--rounds", metavar="JSON", help="write every round of every answer (why, k, times) to this file"
    )
    args = parser.parse_args(argv)
    try:
        ks = [int(k) for k in args.ks.split(",")]
    except ValueError:
        parser.error(f"--ks takes whole numbers separated by commas, not {args.ks!r}")
    if args.prompts < 1 or args.tokens < 2 or args.repeat < 1:
        parser.error("--prompts and --repeat must be at least 1 and --tokens at least 2")
    only = tuple(m for m in args.modes.split(",") if m)
    # checked before a pair is built: a misspelt mode found after minutes of compiling wastes them
    if unknown := [m for m in only if m not in mode_names(ks)]:
        parser.error(
            f"unknown mode {', '.join(unknown)}: choose from {', '.join(mode_names(ks))} "
            "(a fixed k needs its length in --ks)"
        )

    kernels = keep_compiled_kernels()  # as the app does: compiled kernels outlive the process
    attention = "MLX's own" if shape_generic_attention() else "the backend's default"
    print(
        f"device: {mx.default_device()}  pair: {args.pair}  agreement asked: {args.agreement:.2f}  "
        f"compiled kernels kept in: {kernels or 'MLX default'}  attention: {attention}"
    )
    start = time.perf_counter()
    pair = build_pair(args.pair, bits=args.bits, agreement=args.agreement, seed=args.seed)
    built = time.perf_counter()
    prompts = chat_prompts(pair, args.prompts)
    compiled = {"auto": None, "on": True, "off": False}[args.compiled]
    warm_rounds = compile_pass_shapes(pair, prompts[0][1], compiled=compiled)
    warmed = time.perf_counter()
    print(
        f"load {built - start:.2f} s, warm-up {warmed - built:.2f} s ({warm_rounds} rounds), "
        f"together {warmed - start:.2f} s"
    )
    choices = ChatSession(pair, compiled_steps=compiled).step_choices
    for role, choice in (("main", choices.main), ("draft", choices.draft)):
        if choice is not None:
            timing = f": {choice.timing}" if choice.timing is not None else ""
            print(f"compiled passes, {role}: {'on' if choice.compiled else 'off'} ({choice.reason}){timing}")
    answers: list[tuple[str, str, TimedRun]] = []  # every answer of our loop: the costs read the fixed ones

    def keep(prompt: str, mode: str, run: TimedRun) -> None:
        answers.append((prompt, mode, run))

    report = None if args.quiet else (lambda text: print(f"  {text}", file=sys.stderr, flush=True))
    print(format_table([])[0], flush=True)
    saved: dict[SpeculationMode, SavedState] = {}

    def save(mode: SpeculationMode, state: SavedState) -> None:
        saved[mode] = json.loads(json.dumps(state))  # through JSON, as the app's store keeps it

    adaptive = PairPolicies(save=save)
    results = run_prompts(
        pair,
        prompts,
        args.tokens,
        ks,
        args.mlx_k,
        report,
        only,
        done=lambda runs: print("\n".join(format_table([runs])[1:]), flush=True),
        repeat=args.repeat,
        keep=keep,
        adaptive=adaptive,
        compiled=compiled,
    )
    print("\n".join(format_summary(results)))
    if any(r.mode == "adaptive" for r in results[0]):
        first = restored_first_answers(
            pair, adaptive, saved, prompts[0], args.tokens, keep=keep, compiled=compiled
        )
        print(
            f"adaptive restored from its saved state, first answer against a later one: {first_answer_text(first)}"
        )
    if args.rounds is not None:  # the restored controller's answers last, "restored" and "learnt"
        _write_rounds(args.rounds, answers)
    for runs in results:  # what the adaptive answers' stalls were made of
        for r in runs:
            if r.mode == "adaptive" and r.slow:
                print(
                    f"{r.prompt} adaptive, plain step {r.plain_step * 1e3:.1f} ms, rounds over {SLOW_STEPS:g} steps:"
                )
                print("\n".join(f"    {line}" for line in r.slow))
    print("\n".join(cost_lines(pair, prompts[0][1], answers, ks, results)), flush=True)
    measured = measure_agreement(pair, prompts[0][1], args.tokens)
    print(f"agreement measured: {measured:.2f} over {args.tokens} tokens of {prompts[0][0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
