"""Where an import lands: the library's models folder, so the picker lists it at once.

A file imported again is recognised from the provenance its first import left (size, name and
bits), so it is found in the library instead of failing on a folder that already exists.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.engine.gguf.header import GGUFHeader
from app.engine.library.paths import models_dir

PROVENANCE_FILE = "specchat_source.json"


def default_output(source: str | Path, bits: int) -> Path:
    """<library models folder>/<file stem>-<bits>bit."""
    return models_dir() / f"{Path(source).stem}-{bits}bit"


def same_import(folder: Path, header: GGUFHeader, bits: int) -> bool:
    """Whether `folder` is a complete import of the file `header` describes, at `bits`."""
    if not (folder / "config.json").is_file():
        return False
    try:
        source = json.loads((folder / PROVENANCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(source, dict)
        and source.get("size") == header.file_size
        and source.get("bits") == bits
        and source.get("name") == header.get("general.name")
    )


def library_destination(source: str | Path, header: GGUFHeader, bits: int) -> tuple[Path, bool]:
    """(folder, already imported): the existing import of this file, else the first free name, so
    another file that happens to share the name never blocks or replaces it."""
    first = default_output(source, bits)
    for n in range(1, 100):
        folder = first if n == 1 else first.with_name(f"{first.name}-{n}")
        if same_import(folder, header, bits):
            return folder, True
        if not folder.exists():
            return folder, False
    return first, False  # a hundred namesakes: let the importer refuse in words
