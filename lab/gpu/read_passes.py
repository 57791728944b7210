"""Reads of odd lengths, in exact pass sizes against one padded pass, side by side:
`python -m lab.gpu.read_passes --pair 14b-bf16`.

A read that is not a pass size (a draft's catch-up after a bypass, a probe's window, a prefill's
tail) is run on a GPU as one pass padded up to the next size (`buckets.passes`), since there a
pass costs much the same at any size; before, it was split exactly, largest size first. This
times both after a context of `--context` tokens, for each model of a random real-shape pair,
and prints the ratio (docs/measurements/archive/2026-11-26-padded-reads.md). On a CPU a pass
costs its tokens and padding loses: `--pair tiny` runs there in seconds, to check the script.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

import mlx.core as mx

from app.engine.decoding.loading import LoadedModel
from app.engine.decoding.session import ChatSession
from app.engine.decoding.shapes.buckets import passes, run, split
from app.engine.kernel_cache import keep_compiled_kernels, shape_generic_attention
from app.engine.measure.toy_pair import build_pair
from app.engine.measure.toy_shapes import PAIRS
from app.engine.policy.warmup import compile_pass_shapes
from lab.gpu.gpu_bench import chat_prompts


def timed_read(
    session: ChatSession, model: LoadedModel, ids: list[int], context: int, n: int, pad: bool
) -> float:
    """Seconds to read `n` tokens after `context` ones in a fresh cache of the session's kind:
    padded into one pass (`pad`), or in exact pass sizes."""
    cache = session.new_cache(model)
    mx.eval(run(model.model, cache, mx.array(ids[:context], dtype=mx.uint32), True))
    mx.eval([layer.state for layer in cache])
    read = mx.array(ids[context : context + n], dtype=mx.uint32)
    start = time.perf_counter()
    mx.eval(run(model.model, cache, read, True, pad=pad))
    return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.gpu.read_passes", description=__doc__)
    parser.add_argument("--pair", choices=sorted(PAIRS), default="tiny")
    parser.add_argument("--lengths", default="17,45,77,112,300", help="read lengths, comma-separated")
    parser.add_argument("--context", type=int, default=300, help="tokens in the cache before each read")
    parser.add_argument(
        "--repeat", type=int, default=5, help="reads per length and way (the median is shown)"
    )
    args = parser.parse_args(argv)
    lengths = [int(n) for n in args.lengths.split(",")]
    if min(lengths) < 1 or args.context < 1 or args.repeat < 1:
        parser.error("--lengths, --context and --repeat must be at least 1")

    keep_compiled_kernels()  # as the app does
    shape_generic_attention()
    pair = build_pair(args.pair, agreement=0.9, seed=0)
    prompt = chat_prompts(pair, 1)[0][1]
    compile_pass_shapes(pair, prompt)  # every pass size, as after loading
    session = ChatSession(pair, bucketed=True)
    ids = (prompt * ((args.context + max(lengths)) // len(prompt) + 1))[: args.context + max(lengths)]
    print(f"device: {mx.default_device()}  pair: {args.pair}  context: {args.context} tokens")
    print(
        f"{'model':>6}  {'read':>5}  {'exact pieces':>16}  {'exact ms':>9}  {'padded to':>9}  {'padded ms':>9}  {'ratio':>6}"
    )
    models = [("draft", pair.draft), ("main", pair.main)]
    for name, model in models:
        if model is None:
            continue
        for n in lengths:
            exact = statistics.median(
                timed_read(session, model, ids, args.context, n, False) for _ in range(args.repeat)
            )
            padded = statistics.median(
                timed_read(session, model, ids, args.context, n, True) for _ in range(args.repeat)
            )
            pieces = "+".join(map(str, split(n)))
            print(
                f"{name:>6}  {n:>5}  {pieces:>16}  {exact * 1e3:>9.1f}  {passes(n, True)[-1][0]:>9}  "
                f"{padded * 1e3:>9.1f}  {padded / exact:>6.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
