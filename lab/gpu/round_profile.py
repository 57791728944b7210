"""Where a speculative round's time goes:
`python -m lab.gpu.round_profile --pair 14b-bf16 --k 4` (a random pair at real
shapes, as gpu_bench builds it), or `--main PATH --draft PATH` for model folders, loaded as the
command line loads them.

Three tables, every number the median of `--trials` timings (answers: of every round of
`--answers` answers), all measured in one run after the app's warm-up:
- the draft: one fixed-k round's draft phase taken apart (round_split.py): building a step's
  graph on the host, evaluating a built graph, k steps read one by one against chained with
  `async_eval` (the loop's way), the first step with a backlog of one token against none,
  the sampler against a bare argmax, and the draft's floors (floors.py);
- the main: its verify pass over 1 to 9 tokens against its plain step, and its floors;
- the loop: greedy fixed-k answers' rounds (round_loop.py), each round's wall time against its
  passes as the round timed them and timed alone at the same sizes, and the loop's own time
  between passes split by what it does after a verdict.
Then two summary lines: the rounds' wall time over the sum of their passes timed alone, and the
loop's own cost per round. `--pair tiny` runs on a CPU in seconds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from app.engine.blas import ensure_blas

if TYPE_CHECKING:
    from app.engine.decoding.loading import ModelPair
    from lab.gpu.round_split import Row


def _ms(seconds: float) -> str:
    """Milliseconds to four significant digits: a round's tens and a part's microseconds alike."""
    return f"{seconds * 1e3:.4g}"


def format_rows(title: str, rows: Sequence[Row], reference: float, against: str) -> list[str]:
    """A table of rows: ms, ms per token, and each against `reference` (seconds)."""
    lines = [title, f"  {'':<50}  {'ms':>9}  {'ms/token':>9}  {against:>12}"]
    for r in rows:
        per_token = _ms(r.seconds / r.tokens) if r.tokens > 1 else ""
        ratio = f"{r.seconds / r.tokens / reference:.3g}" if reference > 0 else "-"
        lines.append(f"  {r.label:<50}  {_ms(r.seconds):>9}  {per_token:>9}  {ratio:>12}")
    return lines


def load(args: argparse.Namespace) -> ModelPair:
    """The pair the command line names: model folders, or a random pair at real shapes."""
    if args.main is not None:
        from app.engine.library.pairing import load_checked_pair

        return load_checked_pair(args.main, args.draft, force=args.force)
    from app.engine.measure.toy_pair import build_pair

    return build_pair(args.pair, bits=args.bits, agreement=args.agreement, seed=args.seed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.gpu.round_profile", description=__doc__)
    from app.engine.measure.toy_shapes import PAIRS

    parser.add_argument("--pair", choices=sorted(PAIRS), default="tiny", help="a random pair at real shapes")
    parser.add_argument("--bits", type=int, choices=(4, 16), help="override the pair's precision")
    parser.add_argument("--agreement", type=float, default=0.9, help="the random pair's greedy agreement")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--main", help="a main model's folder (instead of --pair)")
    parser.add_argument("--draft", help="its draft model's folder")
    parser.add_argument("--force", action="store_true", help="load a draft the compatibility check refuses")
    parser.add_argument("--k", type=int, default=4, help="the fixed draft length")
    parser.add_argument("--tokens", type=int, default=128, help="tokens per answer")
    parser.add_argument("--answers", type=int, default=3, help="answers decoded for the loop's table")
    parser.add_argument("--trials", type=int, default=5, help="timings per number (the median is shown)")
    args = parser.parse_args(argv)
    if (args.main is None) != (args.draft is None):
        parser.error("--main and --draft go together")
    if not 1 <= args.k <= 8 or args.tokens < 2 or args.answers < 1 or args.trials < 1:
        parser.error("--k takes 1 to 8, --tokens at least 2, --answers and --trials at least 1")
    blas = ensure_blas()  # before MLX is imported: only then can MLX's CPU build use it

    import mlx.core as mx

    from app.engine.decoding.policy import FixedDraftLength
    from app.engine.decoding.sampling import SamplingParams
    from app.engine.features.timed_run import run_timed
    from app.engine.kernel_cache import keep_compiled_kernels, shape_generic_attention
    from app.engine.policy.warmup import compile_pass_shapes, compiles_per_shape
    from lab.gpu.floors import measure_floors
    from lab.gpu.gpu_bench import chat_prompts
    from lab.gpu.passes_alone import draft_rounds, ready_session, time_passes_alone
    from lab.gpu.round_loop import loop_profile, profile_answers
    from lab.gpu.round_split import draft_split, verify_split

    keep_compiled_kernels()  # as the app does
    shape_generic_attention()
    start = time.perf_counter()
    pair = load(args)
    if pair.draft is None:
        parser.error("a draft model is needed")
    loaded = time.perf_counter()
    prompt = chat_prompts(pair, 1)[0][1]
    if compiles_per_shape():  # the warm-up the app runs after loading on a GPU
        compile_pass_shapes(pair, prompt)
    run_timed(pair, prompt, FixedDraftLength(args.k), SamplingParams(), min(args.tokens, 16))
    warmed = time.perf_counter()
    source = (args.main and f"{args.main} + {args.draft}") or f"{args.pair} (random weights)"
    print(f"device: {mx.default_device()}  pair: {source}  k: {args.k}  BLAS: {blas.describe()}")
    print(
        f"load {loaded - start:.1f} s, warm-up {warmed - loaded:.1f} s; medians of {args.trials} "
        f"timings, rounds of {args.answers} answers of {args.tokens} tokens (greedy)",
        flush=True,
    )
    draft_floor, main_floor = measure_floors([pair.draft, pair.main], prompt[-1], args.trials)
    session = ready_session(pair, prompt)
    steps = draft_split(session, args.k, args.trials, draft_floor)
    print()
    print(
        "\n".join(
            format_rows(
                f"draft {pair.draft.name}: one round's draft phase", steps, steps[2].seconds, "x one step"
            )
        ),
        flush=True,
    )
    verify = verify_split(session, args.trials, main_floor)
    print()
    print(
        "\n".join(
            format_rows(
                f"main {pair.main.name}: verify pass by size", verify, verify[0].seconds, "x plain step"
            )
        ),
        flush=True,
    )
    answers = profile_answers(pair, prompt, args.k, args.tokens, args.answers)
    rounds = draft_rounds(r for a in answers for r in a.run.log)
    loop = loop_profile(answers, time_passes_alone(session, rounds, args.trials))
    wall = loop.rows[0][1]
    print()
    print(f"loop: fixed k = {args.k}, {len(rounds)} rounds, {loop.tokens_per_second:.1f} tokens/s")
    print(f"  {'':<50}  {'ms':>9}  {'x round':>9}")
    for label, seconds in loop.rows:
        print(f"  {label:<50}  {_ms(seconds):>9}  {seconds / wall if wall > 0 else 0.0:>9.3g}")
    print()
    print(
        f"round wall / sum of passes: {loop.wall_over_alone:.2f} (passes timed alone), "
        f"{loop.wall_over_in_round:.2f} (as timed in the round)"
    )
    print(f"loop's own cost per round (ms): {loop.loop_own * 1e3:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
