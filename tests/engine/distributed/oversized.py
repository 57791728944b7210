"""A main model larger than any test machine's memory, without writing its bytes: the toy main
with one more weights file whose tensor claims a terabyte, held as a sparse file."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

TERABYTE = 2**40


def write_oversized_main(toy_main: Path, folder: Path) -> Path:
    """The toy main copied to `folder`, plus a valid safetensors file of one 1 TiB layer tensor
    (only its header is on disk), so every size check sees a main that cannot fit."""
    shutil.copytree(toy_main, folder)
    header = json.dumps(
        {
            "model.layers.0.mlp.extra.weight": {
                "dtype": "F16",
                "shape": [TERABYTE // 2],
                "data_offsets": [0, TERABYTE],
            }
        }
    ).encode()
    extra = folder / "model-extra.safetensors"
    with extra.open("wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + TERABYTE)
    return folder
