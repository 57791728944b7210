"""Where SpecChat keeps its own files, and where other apps keep theirs."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def app_data_dir() -> Path:
    """$SPECCHAT_HOME, else the platform's per-user app-data folder."""
    override = os.environ.get("SPECCHAT_HOME")
    if override:
        return Path(override).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "SpecChat"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "specchat"


def models_dir() -> Path:
    """SpecChat's own models: imports and downloads land here."""
    return app_data_dir() / "models"


def model_cache_dir() -> Path:
    """The model cache `python -m app fetch-models` fills: $SPECCHAT_MODEL_CACHE or
    ~/.cache/specchat. Its GGUFs and imports are shared by the tests and benchmarks."""
    return Path(os.environ.get("SPECCHAT_MODEL_CACHE") or Path.home() / ".cache" / "specchat")


def fetched_models_dir() -> Path:
    """Where `fetch-models` puts its MLX imports; the window lists them (read only)."""
    return model_cache_dir() / "mlx"


def partial_dir() -> Path:
    """Unfinished downloads; a dot-folder so discovery never lists them."""
    return models_dir() / ".partial"


def store_path() -> Path:
    return app_data_dir() / "library.sqlite3"


def lmstudio_root() -> Path | None:
    """LM Studio's home: the pointer file if present, else its two default locations."""
    home = Path.home()
    pointer = home / ".lmstudio-home-pointer"
    if pointer.is_file():
        target = pointer.read_text(encoding="utf-8", errors="replace").strip()
        if target and Path(target).expanduser().is_dir():
            return Path(target).expanduser()
    for candidate in (home / ".cache" / "lm-studio", home / ".lmstudio"):
        if candidate.is_dir():
            return candidate
    return None


def lmstudio_models_dir() -> Path | None:
    root = lmstudio_root()
    return root / "models" if root is not None and (root / "models").is_dir() else None


def remove_partial_folders(out: Path) -> None:
    """A killed child (an import or a 16-bit copy) cannot clean up after itself: remove the hidden
    temporary folders it was writing `out` in."""
    for tmp in out.parent.glob(f".{out.name}.partial-*"):
        shutil.rmtree(tmp, ignore_errors=True)


def is_utf8(name: str | Path) -> bool:
    """Whether a name can be handed to MLX, Qt, SQLite and JSON: bytes that are not UTF-8 reach
    Python as surrogate escapes, which all of them refuse (MLX with `std::bad_cast`)."""
    try:
        str(name).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(name: str | Path) -> str:
    """A name as the user typed it, bytes that are not UTF-8 written as \\xNN: safe to print."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")
