"""How much of a decode pass of a split main is spent communicating.

Run on every rank by mlx.launch (or alone: one rank, nothing split), e.g.

    mlx.launch --hosts 127.0.0.1 -n 2 --env OMP_NUM_THREADS=1 -- \\
        python -m lab.sharded.collectives --main MODEL

Each rank loads its shard, reads a 32-token prompt, then times decode passes one token at a time,
each preceded by the small command collective rank 0 sends before every pass (what
`distributed.collective` does). The sharded layers' own all_sums run inside the pass's graph and
cannot be timed there, so the same number of them (two per layer, each of one token's hidden
vector, each waiting on the last) is then timed alone: that is the pass's communication.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import load as mlx_load

from lab.sharded.tp_decode import all_sum_ms


def _ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.sharded.collectives")
    parser.add_argument("--main", required=True)
    parser.add_argument("--passes", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(argv)
    group = mx.distributed.init()
    size = group.size()
    model, _, config = mlx_load(args.main, return_config=True, lazy=True)  # type: ignore[misc]
    if size > 1:
        model.shard(group)
    mx.eval(model.parameters())
    hidden = int(config["hidden_size"])
    layers = len(model.layers)
    cache = make_prompt_cache(model)
    mx.eval(model(mx.array([list(range(1, 33))], dtype=mx.uint32), cache=cache))
    token = mx.array([[100]], dtype=mx.uint32)
    commands: list[float] = []
    passes: list[float] = []
    for i in range(args.warmup + args.passes):
        start = time.perf_counter()
        mx.eval(mx.distributed.all_sum(mx.zeros((19,), dtype=mx.int32), group=group))
        sent = time.perf_counter()
        mx.eval(model(token, cache=cache))
        done = time.perf_counter()
        if i >= args.warmup:
            commands.append(sent - start)
            passes.append(done - sent)
    # the layers' own all_sums, timed alone: two per layer, each of one token's hidden vector
    chained_ms = all_sum_ms(group, 2 * layers, (1, 1, hidden), mx.float32, args.passes, args.warmup)
    if group.rank() == 0:
        result = {
            "ranks": size,
            "layers": layers,
            "hidden": hidden,
            "pass_ms": _ms(passes),
            "command_ms": _ms(commands),
            "layer_all_sums_ms": round(chained_ms, 3),
            "all_sums_per_pass": 2 * layers if size > 1 else 0,
        }
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
