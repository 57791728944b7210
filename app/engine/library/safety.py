"""What SpecChat refuses to touch: pickle weights, remote code, bad repo ids and escaping paths."""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

# owner/name as the hub allows them: letters, digits, '-', '_', '.', no leading '.'/'-', no '..'.
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
# Keys that ask a loader to import code shipped with the model.
REMOTE_CODE_KEYS = ("auto_map", "model_file", "trust_remote_code", "custom_pipelines")


class UnsafeModel(ValueError):
    """A model, repo id or file name SpecChat will not use; the message says why."""


def valid_repo_id(text: str) -> bool:
    return bool(_REPO_ID.match(text)) and ".." not in text and not text.endswith((".git", "."))


def check_repo_id(text: str) -> str:
    if not valid_repo_id(text):
        raise UnsafeModel(f"{text!r} is not a valid hub repo id (owner/name)")
    return text


def check_relative_name(name: str) -> str:
    """A file name from a remote listing: relative, no '..', no drive, no backslash tricks."""
    posix, windows = PurePosixPath(name), PureWindowsPath(name)
    if (
        not name
        or "\x00" in name
        or posix.is_absolute()
        or windows.is_absolute()
        or windows.drive
        or name.startswith(("/", "\\"))
        or ".." in posix.parts
        or ".." in windows.parts
    ):
        raise UnsafeModel(f"refusing file name {name!r}: absolute or escaping its folder")
    return name


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from disk, or {} when missing or malformed (never code, never pickle)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def remote_code_requests(folder: Path) -> list[str]:
    """The remote-code keys a model's configs carry; they are reported, never honoured."""
    found = []
    for name in ("config.json", "tokenizer_config.json"):
        data = read_json(folder / name)
        found += [f"{name}: {key}" for key in REMOTE_CODE_KEYS if key in data]
    return found


def weight_problem(folder: Path) -> str | None:
    """Why the folder's weights are unusable, or None when it has safetensors."""
    if any(folder.glob("*.safetensors")):
        return None
    pickles = (
        sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES) if folder.is_dir() else []
    )
    if pickles:
        return f"only pickle weights ({', '.join(pickles[:3])}); SpecChat loads safetensors only"
    return "no .safetensors weights"
