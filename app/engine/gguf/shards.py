"""Converted tensors written to safetensors shards as they fill.

An import that kept every converted tensor until the end would hold the whole output model in
memory; writing each shard once it reaches its size bounds what is held to one shard plus the
tensor being converted, which is what the importer's memory estimate counts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

INDEX_FILE = "model.safetensors.index.json"


class ShardWriter:
    """Collects converted arrays in `folder` and writes them out every `limit` bytes.

    Shards get their final `model-i-of-n` names in `finish`, once their number is known; until
    then they are named so that no loader mistakes the folder for a model.
    """

    def __init__(self, folder: Path, limit: int) -> None:
        self.folder, self.limit = folder, limit
        self.pending: dict[str, Any] = {}
        self.pending_bytes = 0
        self._written: list[tuple[Path, list[str]]] = []

    def add(self, parts: dict[str, Any]) -> None:
        """Take evaluated arrays; a shard that has reached `limit` bytes is written at once."""
        for name, array in parts.items():
            self.pending[name] = array
            self.pending_bytes += int(array.nbytes)
        if self.pending_bytes >= self.limit:
            self._flush()

    def _flush(self) -> None:
        import mlx.core as mx

        if not self.pending:
            return
        path = self.folder / f"part-{len(self._written) + 1:05d}.safetensors"
        mx.save_safetensors(str(path), self.pending, metadata={"format": "mlx"})
        self._written.append((path, list(self.pending)))
        self.pending, self.pending_bytes = {}, 0
        mx.clear_cache()  # give the written arrays' memory back instead of keeping it for reuse

    def finish(self) -> dict[str, str]:
        """Write the last shard, name them all and write the index; returns tensor -> file."""
        self._flush()
        weight_map: dict[str, str] = {}
        count = len(self._written)
        for i, (path, names) in enumerate(self._written):
            final = f"model-{i + 1:05d}-of-{count:05d}.safetensors"
            os.replace(path, self.folder / final)
            weight_map.update(dict.fromkeys(names, final))
        index = {"metadata": {"format": "mlx"}, "weight_map": dict(sorted(weight_map.items()))}
        (self.folder / INDEX_FILE).write_text(json.dumps(index, indent=2))
        return weight_map
