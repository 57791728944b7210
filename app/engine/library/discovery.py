"""Finding models: the Hugging Face hub cache, LM Studio, SpecChat's own folder, the models
`python -m app fetch-models` imported and user folders.

Other apps' folders are only read, never written. MLX-format folders become library entries;
GGUF files are reported separately, to be offered for import.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from app.engine.library.facts import ModelFacts, facts_for
from app.engine.library.paths import (
    fetched_models_dir,
    is_utf8,
    lmstudio_models_dir,
    models_dir,
    shown_name,
)
from app.engine.library.safety import check_repo_id, valid_repo_id
from app.engine.library.store import Store

HUB, LMSTUDIO, SPECCHAT, FETCHED, USER = "hub", "lmstudio", "specchat", "fetched", "user"
MAX_DEPTH = 4
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Found:
    """One model folder (kind "mlx") or GGUF file (kind "gguf") and where it was found."""

    path: Path
    source: str
    kind: str
    label: str


@dataclass(frozen=True, slots=True)
class Sources:
    hub_cache: Path | None  # None: huggingface_hub's default cache
    lmstudio: Path | None
    specchat: Path
    extra: tuple[Path, ...] = ()
    use_hub: bool = True
    fetched: Path | None = None  # fetch-models' imports (the model cache's mlx folder)


def default_sources(extra: tuple[Path, ...] = ()) -> Sources:
    return Sources(
        hub_cache=None,
        lmstudio=lmstudio_models_dir(),
        specchat=models_dir(),
        extra=extra,
        fetched=fetched_models_dir(),
    )


def is_model_folder(path: Path) -> bool:
    return (path / "config.json").is_file()


def hub_models(cache_dir: Path | None = None) -> list[Found]:
    """The newest snapshot of every model repo in the hub cache (read through scan_cache_dir)."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(cache_dir)
    except (CacheNotFound, OSError):
        return []
    out = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model" or not repo.revisions:
            continue
        newest = max(repo.revisions, key=lambda r: r.last_modified)
        snapshot = Path(newest.snapshot_path)
        if is_model_folder(snapshot):
            out.append(Found(snapshot, HUB, "mlx", repo.repo_id))
        for f in sorted(newest.files, key=lambda f: f.file_name):
            if f.file_name.endswith(".gguf"):
                out.append(Found(Path(f.file_path), HUB, "gguf", f"{repo.repo_id}/{f.file_name}"))
    return out


def folder_models(root: Path, source: str) -> list[Found]:
    """Model folders and GGUF files under `root`, skipping hidden folders (partial downloads)."""
    out: list[Found] = []
    if not root.is_dir():
        return out
    root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        depth = len(here.relative_to(root).parts)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")) if depth < MAX_DEPTH else []
        label = str(here.relative_to(root)) if here != root else here.name
        if "config.json" in filenames:
            out.append(Found(here, source, "mlx", label))
            dirnames[:] = []  # a model folder's subfolders are its own business
        for name in sorted(filenames):
            if name.endswith(".gguf"):
                out.append(Found(here / name, source, "gguf", f"{label}/{name}"))
    return out


def discover(sources: Sources) -> list[Found]:
    found = hub_models(sources.hub_cache) if sources.use_hub else []
    if sources.lmstudio is not None:
        found += folder_models(sources.lmstudio, LMSTUDIO)
    found += folder_models(sources.specchat, SPECCHAT)
    if sources.fetched is not None:
        found += folder_models(sources.fetched, FETCHED)
    for extra in sources.extra:
        found += folder_models(extra, USER)
    seen: set[Path] = set()
    unique = []
    for f in found:
        if not is_utf8(f.path):  # nothing downstream can open it; skipped rather than a crash
            log.warning("skipped %s: its name is not UTF-8; rename it to use it", shown_name(f.path))
            continue
        key = f.path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def scan_library(sources: Sources, store: Store | None = None) -> tuple[list[ModelFacts], list[Found]]:
    """(facts of every MLX model, GGUF files to offer for import); facts come from the cache."""
    found = discover(sources)
    folders = [f for f in found if f.kind == "mlx"]
    facts = facts_for([f.path for f in folders], USER, store)
    named = [dataclasses.replace(x, name=f.label, source=f.source) for x, f in zip(facts, folders)]
    return named, [f for f in found if f.kind == "gguf"]


def resolve_model(text: str, sources: Sources | None = None) -> Path:
    """A folder path as given, or a repo id looked up among the discovered models."""
    path = Path(text).expanduser()
    if path.exists():
        if not is_model_folder(path):
            raise FileNotFoundError(f"{path} is not a model folder: it has no config.json")
        return path
    if not valid_repo_id(text):
        check_repo_id(text)
    for f in discover(sources or default_sources()):
        if f.kind == "mlx" and (f.label == text or (f.label.endswith("/" + text) and f.source != HUB)):
            return f.path
    raise FileNotFoundError(f"{text} is not downloaded: no folder or cached repo by that name")
