"""Whether a weights file is what safetensors promises, read from its header alone (pure Python).

The loader refuses such a file before MLX reads it, and the library marks its folder damaged, so a
pickle in disguise, a web page saved under the name or a download cut short is named instead of
crashing the loader or being offered in the picker.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path


def safetensors_problem(path: Path) -> str | None:
    """What is wrong with the file, in the format's own terms; None when its header holds."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return "not a safetensors file (too short)"
            (length,) = struct.unpack("<Q", head)
            if length == 0 or 8 + length > size:
                return f"not a safetensors file (header length {length} past the end)"
            raw = f.read(length)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        return f"safetensors header is not JSON ({exc})"
    if not isinstance(header, dict):
        return "safetensors header is not a JSON object"
    data_size = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= data_size
        ):
            return f"safetensors header gives tensor {name!r} sizes the file lacks"
    return None
