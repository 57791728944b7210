"""Will each machine's share of a split main model fit in the memory it has free?

Tensor parallelism splits every layer's matrices across the machines; the embeddings, the
output head and the norms stay whole on each. The KV cache splits by key-value heads when they
divide evenly, else every machine keeps all of it. The draft runs on this Mac (the first) only.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path

from app.engine.library.facts import ModelFacts, safetensors_header
from app.engine.library.memory import OVERHEAD, kv_bytes
from app.engine.library.safety import read_json

TIGHT = 0.85  # above this share of free memory, other apps' growth could push it out
_LAYER = re.compile(r"(?:^|\.)layers\.\d+\.")


class Verdict(enum.Enum):
    FITS = "fits"
    TIGHT = "tight"
    NO = "does not fit"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What splitting needs to know of the main model, from its headers and config only."""

    weights: int  # bytes of all weights
    whole: int  # bytes every machine holds in full: embeddings, output head, norms
    kv_heads: int | None


def model_shape(folder: Path, facts: ModelFacts) -> ModelShape:
    """Sizes from the safetensors headers (no weights read); the folder size when they are absent."""
    split = whole = 0
    for shard in sorted(Path(folder).glob("*.safetensors")):
        for name, info in safetensors_header(shard).items():
            offsets = info.get("data_offsets") if isinstance(info, dict) else None
            if name == "__metadata__" or not isinstance(offsets, list) or len(offsets) != 2:
                continue
            size = int(offsets[1]) - int(offsets[0])
            if _LAYER.search(name) and "norm" not in name.rsplit("layers.", 1)[1]:
                split += size
            else:
                whole += size
    config = read_json(Path(folder) / "config.json")
    config = {**config, **config["text_config"]} if isinstance(config.get("text_config"), dict) else config
    kv = config.get("num_key_value_heads") or config.get("num_attention_heads")
    weights = split + whole if split + whole else facts.size_bytes
    return ModelShape(weights, whole, kv if isinstance(kv, int) and kv > 0 else None)


@dataclass(frozen=True, slots=True)
class HostShare:
    """One machine's part of the load, against what it has free."""

    host: str
    weights: int
    kv: int
    draft: int  # the draft's weights and cache: only on this Mac
    overhead: int
    free: int | None  # None when the machine did not answer

    @property
    def need(self) -> int:
        return self.weights + self.kv + self.draft + self.overhead

    @property
    def verdict(self) -> Verdict:
        if self.free is None:
            return Verdict.UNKNOWN
        if self.need > self.free:
            return Verdict.NO
        return Verdict.TIGHT if self.need > TIGHT * self.free else Verdict.FITS

    def explain(self) -> str:
        parts = f"model part {gb(self.weights)} + its memory of the chat {gb(self.kv)}"
        if self.draft:
            parts += f" + draft {gb(self.draft)}"
        parts += f" + {gb(self.overhead)} margin = {gb(self.need)}"
        if self.free is None:
            return f"needs {parts}; its free memory is not known"
        return f"needs {parts} of {gb(self.free)} free"


def gb(n: int) -> str:
    """Memory as macOS shows it: binary gigabytes, written GB."""
    return f"{n / 2**30:.1f} GB"


def kv_share(kv_total: int, kv_heads: int | None, machines: int) -> int:
    """Each machine's part of the main's KV cache: heads split only when they divide evenly."""
    if kv_heads and kv_heads % machines == 0:
        return kv_total // machines
    return kv_total


def split_fit(
    main: ModelFacts,
    shape: ModelShape,
    hosts: list[tuple[str, int | None]],
    context: int,
    draft: ModelFacts | None = None,
) -> list[HostShare]:
    """Each host's share, in rank order; `hosts` pairs a name with its free bytes (None: unknown)."""
    n = max(1, len(hosts))
    weights = shape.whole + -(-(shape.weights - shape.whole) // n)  # the larger part on uneven splits
    kv = kv_share(kv_bytes(main, context), shape.kv_heads, n)
    draft_bytes = draft.size_bytes + kv_bytes(draft, context) if draft is not None else 0
    return [
        HostShare(name, weights, kv, draft_bytes if rank == 0 else 0, OVERHEAD, free)
        for rank, (name, free) in enumerate(hosts)
    ]
