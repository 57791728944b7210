"""Real-shape random-weight Qwen2.5-like mains, built in memory from a seed, for sharding benchmarks.

Nothing is written to disk (a 32B bf16 model would fill it). Every rank builds the same weights
from the same seed, so a sharded run and a one-device run decode the same model. The draft is the
main's first layers with the main's embedding, final norm and head (as the toy pair's draft is):
it agrees with the main often, so speculation has real acceptance even with random weights. It
runs whole on every rank: every rank drafts the same tokens, so the ranks stay in lock-step with
no broadcast of the draft's tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_unflatten
from mlx_lm.models import qwen2

# A unit embedding keeps the token identity in the residual stream, so the draft (shared
# embedding and head) often agrees with the main; layer weights scale as gain / sqrt(fan-in) so
# each layer moves the stream by about the same amount at every shape, tiny or 14B.
EMBED_STD = 1.0
HEAD_STD = 0.15
BIAS_STD = 0.02
LAYER_GAIN = 0.8


@dataclass(frozen=True)
class MainShape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int


SHAPES = {
    # CPU tests: small enough for two ring ranks on a shared 2-core machine
    "tiny": MainShape(hidden=64, layers=4, heads=4, kv_heads=2, intermediate=128, vocab=256),
    "1.5b": MainShape(hidden=1536, layers=28, heads=12, kv_heads=2, intermediate=8960, vocab=151936),
    "14b": MainShape(hidden=5120, layers=48, heads=40, kv_heads=8, intermediate=13824, vocab=152064),
    "32b": MainShape(hidden=5120, layers=64, heads=40, kv_heads=8, intermediate=27648, vocab=152064),
}


def _args(shape: MainShape, layers: int) -> qwen2.ModelArgs:
    return qwen2.ModelArgs(
        model_type="qwen2",
        hidden_size=shape.hidden,
        num_hidden_layers=layers,
        intermediate_size=shape.intermediate,
        num_attention_heads=shape.heads,
        rms_norm_eps=1e-6,
        vocab_size=shape.vocab,
        num_key_value_heads=shape.kv_heads,
        tie_word_embeddings=False,
    )


def _std(path: str, shape: tuple[int, ...], gain: float) -> float:
    if path.startswith("model.embed_tokens"):
        return EMBED_STD
    if path.startswith("lm_head"):
        return HEAD_STD
    if len(shape) == 1:
        return BIAS_STD
    return gain / math.sqrt(shape[-1])


def _random_parameters(model: Any, seed: int, dtype: mx.Dtype, gain: float) -> dict[str, Any]:
    """Normal weights (unit norms) drawn in a fixed order, lazily: only what is kept is computed."""
    mx.random.seed(seed)
    flat: list[tuple[str, mx.array]] = []
    for path, value in cast("list[tuple[str, mx.array]]", tree_flatten(model.parameters())):
        if path.endswith("norm.weight"):
            flat.append((path, mx.ones(value.shape, dtype=dtype)))
        else:
            flat.append(
                (path, mx.random.normal(value.shape, dtype=dtype, scale=_std(path, value.shape, gain)))
            )
    params: dict[str, Any] = tree_unflatten(flat)
    return params


@dataclass
class BuiltPair:
    main: Any
    draft: Any
    shape: MainShape
    draft_layers: int
    sharded: bool


def build_pair(
    shape_name: str,
    seed: int,
    dtype: mx.Dtype,
    draft_layers: int,
    group: mx.distributed.Group | None,
    gain: float = LAYER_GAIN,
) -> BuiltPair:
    """The main (sharded over `group` when it has more than one rank) and its whole draft."""
    shape = SHAPES[shape_name]
    if not 0 < draft_layers < shape.layers:
        raise ValueError(f"draft layers must be between 1 and {shape.layers - 1}")
    main = qwen2.Model(_args(shape, shape.layers))
    main.update(_random_parameters(main, seed, dtype, gain))
    draft = qwen2.Model(_args(shape, draft_layers))
    shared = {
        "model": {
            "embed_tokens": main.model.embed_tokens.parameters(),
            "norm": main.model.norm.parameters(),
            "layers": [layer.parameters() for layer in main.model.layers[:draft_layers]],
        },
        "lm_head": main.lm_head.parameters(),
    }
    draft.update(shared)
    sharded = group is not None and group.size() > 1
    if group is not None and sharded:
        for n, name in ((shape.heads, "heads"), (shape.kv_heads, "KV heads")):
            if n % group.size():
                raise ValueError(f"{n} {name} do not split over {group.size()} ranks")
        main.shard(group)
    mx.eval(main.parameters(), draft.parameters())
    return BuiltPair(main=main, draft=draft, shape=shape, draft_layers=draft_layers, sharded=sharded)


class LocalPartial(nn.Module):  # type: ignore[misc,name-defined]
    """A sharded-to-all projection without its all_sum: the same matmul, so timing it shows what
    a pass costs with communication removed (its outputs are wrong, only its time is used)."""

    def __init__(self, weight: mx.array, bias: mx.array | None) -> None:
        super().__init__()
        self.weight = weight
        if bias is not None:
            self.bias = bias

    def __call__(self, x: mx.array) -> mx.array:
        y = x @ self.weight.T
        return y + self.bias if "bias" in self else y


def without_all_sums(main: Any) -> list[tuple[Any, Any]]:
    """Swap every o_proj and down_proj for a LocalPartial; returns what `restore` puts back."""
    saved = []
    for layer in main.model.layers:
        saved.append((layer.self_attn.o_proj, layer.mlp.down_proj))
        for parent, name in ((layer.self_attn, "o_proj"), (layer.mlp, "down_proj")):
            proj = getattr(parent, name)
            bias = proj.get("bias")
            setattr(parent, name, LocalPartial(proj["weight"], bias))
    return saved


def restore(main: Any, saved: list[tuple[Any, Any]]) -> None:
    for layer, (o_proj, down_proj) in zip(main.model.layers, saved, strict=True):
        layer.self_attn.o_proj = o_proj
        layer.mlp.down_proj = down_proj
