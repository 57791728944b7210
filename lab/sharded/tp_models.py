"""The sharding benchmark's models: toy_pair's real-shape random pair, its main sharded over the
group with mlx-lm's `model.shard(group)`, its draft whole on every rank.

Every rank builds the same pair from the same seed, so a sharded run and a one-device run decode
the same model. The draft runs whole on every rank: every rank drafts the same tokens, so the
ranks stay in lock-step with no broadcast of the draft's tokens. toy_pair gives the pair a chosen
greedy agreement with the top-1 logit far ahead of the rest, so speculation has real acceptance
and a sharded run's different summation order cannot flip a greedy choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import mlx.nn
import numpy as np

from app.engine.measure.toy import VOCAB_SIZE
from app.engine.measure.toy_pair import GROUP_SIZE, build_pair
from app.engine.measure.toy_shapes import PairSpec, greedy_maps, pair_spec

nn: Any = mlx.nn  # mlx declares no types for its modules


@dataclass
class BuiltPair:
    main: Any
    draft: Any
    spec: PairSpec
    sharded: bool
    successor: np.ndarray  # the main's greedy next token of each toy id

    def cycle(self, start: int, length: int) -> list[int]:
        """`length` ids of the main's own greedy text from `start`: a prompt the main continues
        along its cycle and the draft follows at the pair's agreement."""
        ids = [start]
        while len(ids) < length:
            ids.append(int(self.successor[ids[-1]]))
        return ids


class SplitError(ValueError):
    """The main cannot be sharded over this many ranks; the message says which size."""


def check_splits(spec: PairSpec, world: int) -> None:
    """Raise before building when the main's heads or (4-bit) quantization groups do not split."""
    shape = spec.main
    for n, name in ((shape.heads, "heads"), (shape.kv_heads, "KV heads")):
        if n % world:
            raise SplitError(f"{spec.name}: {n} {name} do not split over {world} ranks")
    if spec.bits != 16:
        # a sharded-to-all projection splits its input: each part must hold whole groups
        for n, name in ((shape.hidden, "hidden"), (shape.intermediate, "intermediate")):
            if n % (world * GROUP_SIZE):
                raise SplitError(f"{spec.name}: {name} {n} is not {world} parts of whole groups")


def build_sharded_pair(
    name: str,
    agreement: float,
    seed: int,
    group: mx.distributed.Group | None,
    bits: int | None = None,
) -> BuiltPair:
    """The named toy pair (`bits` overrides its precision) with its main sharded over `group`
    when it has more than one rank."""
    spec = pair_spec(name, bits)
    world = group.size() if group is not None else 1
    check_splits(spec, world)
    pair = build_pair(spec.main, spec.draft, spec.bits, agreement, seed)
    assert pair.draft is not None
    main, draft = pair.main.model, pair.draft.model
    if group is not None and world > 1:
        main.shard(group)
        # the whole layers are freed once the shards are evaluated
        mx.eval(main.parameters())
    successor = greedy_maps(VOCAB_SIZE, agreement, seed).main
    return BuiltPair(main=main, draft=draft, spec=spec, sharded=world > 1, successor=successor)


class LocalPartial(nn.Module):  # type: ignore[misc]
    """A sharded-to-all projection without its all_sum: the same (plain or quantized) matmul, so
    timing it shows what a pass costs with communication removed (its outputs are wrong, only its
    time is used)."""

    def __init__(self, proj: Any) -> None:
        super().__init__()
        self.proj = proj

    def __call__(self, x: mx.array) -> mx.array:
        p = self.proj
        if "scales" in p:
            y = mx.quantized_matmul(
                x,
                p["weight"],
                scales=p["scales"],
                biases=p.get("biases"),
                transpose=True,
                group_size=p.group_size,
                bits=p.bits,
                mode=getattr(p, "mode", "affine"),
            )
        else:
            y = x @ p["weight"].T
        return y + p["bias"] if "bias" in p else y


def without_all_sums(main: Any) -> list[tuple[Any, Any]]:
    """Swap every o_proj and down_proj for a LocalPartial; returns what `restore` puts back."""
    saved = []
    for layer in main.model.layers:
        saved.append((layer.self_attn.o_proj, layer.mlp.down_proj))
        layer.self_attn.o_proj = LocalPartial(layer.self_attn.o_proj)
        layer.mlp.down_proj = LocalPartial(layer.mlp.down_proj)
    return saved


def restore(main: Any, saved: list[tuple[Any, Any]]) -> None:
    for layer, (o_proj, down_proj) in zip(main.model.layers, saved, strict=True):
        layer.self_attn.o_proj = o_proj
        layer.mlp.down_proj = down_proj
