"""MLX's own reference BLAS against the optimized one SpecChat loads, on the toy pair.

`python -m app.devtools.blas_bench [--models DIR] [--repeats N]` runs two child processes, one
with `SPECCHAT_BLAS=none` and one as the app starts (the BLAS it finds), since the library must
be chosen before MLX is imported and cannot change afterwards. Each child times, on the toy main:
the first token after a ~900-token prompt (what reading a long prompt costs), a 128-token plain
decode, one verify pass over 5 tokens after that prompt, and the draft's 512-token prefill. The
parent prints both side by side with the ratio. Medians over the repeats; not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROMPT_TOKENS = 900
DECODE_TOKENS = 128
VERIFY_TOKENS = 5
DRAFT_PREFILL = 512
TEXT = (
    "Speculative decoding lets a small draft model propose several tokens, and the large model "
    'checks them all in one pass. def merge(a, b): return sorted(a + b) # {"name": "Alice"}\n'
)
ROWS = (
    ("first_token_s", f"first token after a {PROMPT_TOKENS}-token prompt", "s"),
    ("decode_tok_s", f"{DECODE_TOKENS}-token plain decode", "tok/s"),
    ("verify_ms", f"verify pass of {VERIFY_TOKENS} tokens", "ms"),
    ("draft_prefill_ms", f"draft prefill of {DRAFT_PREFILL} tokens", "ms"),
)


def _prompt(tokenizer: Any, length: int) -> list[int]:
    ids: list[int] = []
    while len(ids) < length:
        ids += tokenizer.encode(TEXT, add_special_tokens=False)
    return ids[:length]


def _measure(models: Path, repeats: int) -> dict[str, Any]:
    """Runs in the child, after ensure_blas(): every MLX import is below this line."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from app.engine.decoding.decode import generate
    from app.engine.decoding.events import TokenEvent
    from app.engine.decoding.loading import ModelPair, load_model
    from app.engine.decoding.policy import PlainDecoding
    from app.engine.decoding.session import ChatSession

    main, draft = load_model(models / "main"), load_model(models / "draft")
    pair = ModelPair(main)
    prompt = _prompt(main.tokenizer, PROMPT_TOKENS)

    def first_token(ids: list[int]) -> float:
        started = time.perf_counter()
        for event in generate(ChatSession(pair), ids, policy=PlainDecoding(), max_tokens=1, stop_ids=[]):
            if isinstance(event, TokenEvent):
                return time.perf_counter() - started
        raise RuntimeError("no token was generated")

    def decode_rate() -> float:
        times = [
            e.time
            for e in generate(ChatSession(pair), prompt[:16], max_tokens=DECODE_TOKENS, stop_ids=[])
            if isinstance(e, TokenEvent)
        ]
        return (len(times) - 1) / (times[-1] - times[0])

    def forward_ms(model: Any, ids: list[int], cache: list[Any]) -> float:
        started = time.perf_counter()
        mx.eval(model(mx.array([ids]), cache=cache))
        return 1000 * (time.perf_counter() - started)

    first_token(prompt[:64])  # warm-up: MLX's first calls allocate and build kernels
    result: dict[str, Any] = {
        "first_token_s": statistics.median(first_token(prompt) for _ in range(repeats)),
        "decode_tok_s": statistics.median(decode_rate() for _ in range(repeats)),
    }
    cache = make_prompt_cache(main.model)
    mx.eval(main.model(mx.array([prompt]), cache=cache))
    verify = []
    for _ in range(4 * repeats):
        verify.append(forward_ms(main.model, prompt[:VERIFY_TOKENS], cache))
        for c in cache:
            c.trim(VERIFY_TOKENS)  # back to the prompt, as a refused draft is rewound
    result["verify_ms"] = statistics.median(verify)
    result["draft_prefill_ms"] = statistics.median(
        forward_ms(draft.model, prompt[:DRAFT_PREFILL], make_prompt_cache(draft.model))
        for _ in range(repeats)
    )
    return result


def _child(models: Path, repeats: int) -> int:
    from app.engine.blas import ensure_blas

    status = ensure_blas()  # first, before anything imports MLX
    result = _measure(models, repeats)
    print(json.dumps({"blas": status.describe(), "optimized": status.optimized, **result}))
    return 0


def _run_child(models: Path, repeats: int, blas: str | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "SPECCHAT_BLAS"}
    if blas is not None:
        env["SPECCHAT_BLAS"] = blas
    command = [sys.executable, "-m", "app.devtools.blas_bench", "--child", "--models", str(models)]
    done = subprocess.run([*command, "--repeats", str(repeats)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"blas_bench: the child ({blas or 'default'}) failed:\n{done.stderr}")
    return dict(json.loads(done.stdout.splitlines()[-1]))


def format_table(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Both runs side by side; the ratio is how many times better the second is (>1: faster)."""
    lines = [f"reference: {before['blas']}", f"optimized: {after['blas']}", ""]
    lines.append(f"{'measure':<46}{'reference':>11}{'optimized':>11}{'ratio':>8}")
    for key, label, unit in ROWS:
        old, new = before[key], after[key]
        ratio = new / old if unit == "tok/s" else old / new
        lines.append(f"{label + ' (' + unit + ')':<46}{old:>11.2f}{new:>11.2f}{ratio:>7.1f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.devtools.blas_bench", description=__doc__)
    parser.add_argument("--models", type=Path, default=Path("/tmp/toy_blas"), help="toy pair folder")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.models, args.repeats)
    if not (args.models / "main" / "config.json").is_file():
        subprocess.run([sys.executable, "-m", "app", "toy-models", str(args.models)], check=True)
    before = _run_child(args.models, args.repeats, "none")
    after = _run_child(args.models, args.repeats, None)
    print(format_table(before, after))
    if not after["optimized"]:
        print("\nno optimized BLAS was found: both columns ran on MLX's own")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
