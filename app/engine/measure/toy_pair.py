"""Random main/draft pairs at Qwen2.5's real shapes, with a settable agreement.

Built in memory on MLX's default device (a GPU builds 14B's 30 GB of weights in seconds, where
numpy on the CPU would take minutes and model folders cannot be copied to a lent machine), or
written as ordinary MLX model folders for `python -m app toy-models --pair`.

How a random model gets a chosen greedy token: the embedding is large next to what the layers
add (their output projections are small), so the last hidden state is the current token's
embedding plus a little; lm_head row perm[t] is that embedding, scaled, so the greedy next
token is perm[t] with a wide margin. Every weight is still read at every step, so a step costs
what the real model's does. toy_shapes.py picks the two perms.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten

from app.engine.decoding.loading import LoadedModel, ModelPair
from app.engine.measure.toy import (
    EOS_TOKEN,
    MARKER,
    VOCAB_SIZE,
    check_replaceable,
    qwen2_config,
    swap_into_place,
    token_id,
    train_tokenizer,
    write_json,
    write_tokenizer_files,
)
from app.engine.measure.toy_shapes import SHAPES, PairSpec, RealShape, greedy_maps, pair_spec

STD = 0.02
# The output projections write into the residual stream: small, so the embedding dominates it
OUT_STD = 1e-4
EMBED_STD = 1.0
# The greedy token's logit; every other one is near 0 (rows of HEAD_NOISE / sqrt(hidden))
GAIN = 24.0
HEAD_NOISE = 0.1
GROUP_SIZE = 64

nn: Any = mlx.nn  # mlx declares no types for its modules


def build_pair(
    main_shape: RealShape | str,
    draft_shape: RealShape | str | None = None,
    bits: int | None = None,
    agreement: float = 0.9,
    seed: int = 0,
) -> ModelPair:
    """A main and a draft whose greedy tokens agree at `agreement` of positions, in memory.

    `main_shape` is a RealShape, or a pair name from toy_shapes.PAIRS (then `draft_shape` may be
    left out). bits 4 quantizes every Linear and the embedding (group 64), as mlx-lm's 4-bit
    models are; 16 keeps bfloat16 (float32 for the CPU-sized `tiny` pair)."""
    spec = _resolve(main_shape, draft_shape, bits)
    tokenizer_json = train_tokenizer()
    maps = greedy_maps(VOCAB_SIZE, agreement, seed)
    key = mx.random.key(seed)
    main_key, draft_key = mx.random.split(key)
    main, main_config = _build_model(spec.main, maps.main, spec, tokenizer_json, main_key)
    draft, draft_config = _build_model(spec.draft, maps.draft, spec, tokenizer_json, draft_key)
    return ModelPair(
        main=LoadedModel(main, _tokenizer(tokenizer_json, main_config), main_config, f"toy-{spec.name}-main"),
        draft=LoadedModel(
            draft, _tokenizer(tokenizer_json, draft_config), draft_config, f"toy-{spec.name}-draft"
        ),
    )


def write_pair(
    out_dir: Path, name: str, bits: int | None = None, agreement: float = 0.9, seed: int = 0
) -> tuple[Path, Path]:
    """Write build_pair's models as main/ and draft/ under `out_dir` (replaced only when it is
    empty or toy-models wrote it); their paths."""
    spec = pair_spec(name, bits)
    out_dir = Path(out_dir).absolute()
    check_replaceable(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    pair = build_pair(spec.main, spec.draft, spec.bits, agreement, seed)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        tokenizer_json = train_tokenizer()
        assert pair.draft is not None
        for folder_name, loaded in (("main", pair.main), ("draft", pair.draft)):
            folder = tmp / folder_name
            folder.mkdir()
            write_json(folder / "config.json", loaded.config)
            write_tokenizer_files(folder, tokenizer_json)
            weights = dict(tree_flatten(loaded.model.parameters()))
            mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
        marker = {"seed": seed, "pair": spec.name, "bits": spec.bits, "agreement": agreement}
        write_json(tmp / MARKER, {**marker, "models": ["main", "draft"]})
        swap_into_place(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir / "main", out_dir / "draft"


def _resolve(main: RealShape | str, draft: RealShape | str | None, bits: int | None) -> PairSpec:
    if isinstance(main, str) and draft is None:
        return pair_spec(main, bits)
    if draft is None:
        raise ValueError("a main shape needs a draft shape")
    main = SHAPES[main] if isinstance(main, str) else main
    draft = SHAPES[draft] if isinstance(draft, str) else draft
    bits = 16 if bits is None else bits
    if bits not in (4, 16):
        raise ValueError(f"bits must be 4 or 16, not {bits}")
    dtype = "float32" if main.name.startswith("tiny") else "bfloat16"
    return PairSpec(f"{main.name}+{draft.name}-{bits}bit", main, draft, bits, dtype)


def config_for(shape: RealShape, eos_id: int, dtype: str, bits: int) -> dict[str, Any]:
    """The config.json of one model: what mlx-lm builds the same model from."""
    config = qwen2_config(
        hidden=shape.hidden,
        layers=shape.layers,
        heads=shape.heads,
        kv_heads=shape.kv_heads,
        intermediate=shape.intermediate,
        vocab=shape.vocab,
        eos_id=eos_id,
        dtype=dtype,
        rope_theta=1000000.0,
    )
    if bits != 16:
        config["quantization"] = {"group_size": GROUP_SIZE, "bits": bits}
    return config


def _quantizable(_path: str, module: Any) -> bool:
    return isinstance(module, nn.Linear | nn.Embedding)


def _build_model(
    shape: RealShape, successor: np.ndarray, spec: PairSpec, tokenizer_json: str, key: mx.array
) -> tuple[Any, dict[str, Any]]:
    from mlx_lm.models.qwen2 import Model, ModelArgs

    config = config_for(shape, token_id(tokenizer_json, EOS_TOKEN), spec.dtype, spec.bits)
    # the constructor's own initial weights are lazy and replaced before anything evaluates them
    model = Model(ModelArgs.from_dict(config))  # type: ignore[no-untyped-call]
    dtype = getattr(mx, spec.dtype)
    keys = _keys(key)

    def normal(rows: int, cols: int | None = None, std: float = STD) -> mx.array:
        shape_ = (rows,) if cols is None else (rows, cols)
        return mx.random.normal(shape_, dtype=dtype, scale=std, key=next(keys))

    hidden, inter = shape.hidden, shape.intermediate
    kv = shape.kv_heads * (hidden // shape.heads)
    for layer in model.model.layers:
        # one layer at a time, evaluated (and quantized) before the next: peak memory stays
        # one layer above the finished model's
        weights = {
            "input_layernorm.weight": mx.ones((hidden,), dtype=dtype),
            "post_attention_layernorm.weight": mx.ones((hidden,), dtype=dtype),
            "self_attn.q_proj.weight": normal(hidden, hidden),
            "self_attn.q_proj.bias": normal(hidden),
            "self_attn.k_proj.weight": normal(kv, hidden),
            "self_attn.k_proj.bias": normal(kv),
            "self_attn.v_proj.weight": normal(kv, hidden),
            "self_attn.v_proj.bias": normal(kv),
            "self_attn.o_proj.weight": normal(hidden, hidden, std=OUT_STD),
            "mlp.gate_proj.weight": normal(inter, hidden),
            "mlp.up_proj.weight": normal(inter, hidden),
            "mlp.down_proj.weight": normal(hidden, inter, std=OUT_STD),
        }
        layer.update(tree_unflatten(list(weights.items())))
        if spec.bits != 16:
            nn.quantize(layer, GROUP_SIZE, spec.bits, class_predicate=_quantizable)
        mx.eval(layer.parameters())

    embed = normal(shape.vocab, hidden, std=EMBED_STD)
    n = len(successor)
    text = embed[:n].astype(mx.float32)
    # row successor[t] points along token t's embedding, so h ≈ embed[t] scores it GAIN
    rows = text * (GAIN / hidden) / mx.sqrt(mx.mean(text * text, axis=1, keepdims=True))
    # a one-hot matmul rather than a scatter: several ids lead to the cycle's start
    onehot = np.zeros((n, n), dtype=np.float32)
    onehot[successor, np.arange(n)] = 1.0
    noise = normal(shape.vocab, hidden, std=HEAD_NOISE / hidden**0.5)
    aimed = (noise[:n].astype(mx.float32) + mx.array(onehot) @ rows).astype(dtype)
    head = mx.concatenate([aimed, noise[n:]], axis=0)
    model.update(
        {
            "model": {"embed_tokens": {"weight": embed}, "norm": {"weight": mx.ones((hidden,), dtype=dtype)}},
            "lm_head": {"weight": head},
        }
    )
    if spec.bits != 16:
        nn.quantize(model, GROUP_SIZE, spec.bits, class_predicate=_quantizable)
    mx.eval(model.parameters())
    model.eval()
    return model, config


def _keys(key: mx.array) -> Iterator[mx.array]:
    """An endless seeded stream of keys, one per tensor, in the order tensors are drawn."""
    while True:
        key, sub = mx.random.split(key)
        yield sub


def _tokenizer(tokenizer_json: str, config: dict[str, Any]) -> Any:
    """The toy tokenizer, read by mlx-lm from a scratch folder as it would read a model folder's
    (a few kilobytes: the weights never touch the disk)."""
    from mlx_lm.utils import load_tokenizer

    with tempfile.TemporaryDirectory(prefix="toy-tokenizer-") as folder:
        path = Path(folder)
        (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
        write_tokenizer_files(path, tokenizer_json)
        return load_tokenizer(path, eos_token_ids=config["eos_token_id"])  # type: ignore[no-untyped-call]


def measure_agreement(pair: ModelPair, prompt: list[int], tokens: int) -> float:
    """The share of the main's next `tokens` greedy tokens the draft's greedy choice matches,
    each read with the main's own text before it (what a draft round's first proposal faces)."""
    from app.engine.decoding.decode import generate
    from app.engine.decoding.events import TokenEvent
    from app.engine.decoding.policy import PlainDecoding
    from app.engine.decoding.session import ChatSession

    if pair.draft is None:
        raise ValueError("the pair has no draft")
    events = generate(ChatSession(pair), prompt, policy=PlainDecoding(), max_tokens=tokens)
    answer = [e.id for e in events if isinstance(e, TokenEvent)]
    ids = mx.array(prompt + answer, dtype=mx.uint32)[None]
    guesses = mx.argmax(pair.draft.model(ids)[0, len(prompt) - 1 : -1], axis=-1).tolist()
    assert isinstance(guesses, list)
    return sum(g == a for g, a in zip(guesses, answer)) / len(answer) if answer else 0.0
