"""Downloading a model repo from the hub into SpecChat's models folder, with progress and cancel.

huggingface_hub's `snapshot_download` does the transfer (retries, Range resumes inside a run,
files already fetched are kept across runs). Files land in a hidden `.partial` folder and move
into place only once every file arrived and the folder passed the safety checks, so a cancelled
or failed download never looks like a complete model.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.library.paths import models_dir
from app.engine.library.safety import UnsafeModel, check_relative_name, check_repo_id, weight_problem

# Only metadata, tokenizers and safetensors are fetched: pickle weights are never downloaded.
ALLOWED = ("*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken", "*.md")
REPORT_EVERY = 0.1  # seconds between progress reports


class DownloadError(Exception):
    """The download did not complete; the message says why."""


class DownloadCancelled(Exception):
    """The user cancelled; nothing that looks complete was left behind."""


@dataclass(frozen=True, slots=True)
class DownloadProgress:
    repo_id: str
    done_bytes: int
    total_bytes: int
    bytes_per_second: float
    finished: bool = False


def offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub read it at import, or as the environment says now."""
    from huggingface_hub import constants

    now = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    return bool(constants.HF_HUB_OFFLINE) or now


def destination(repo_id: str, root: Path | None = None) -> Path:
    owner, name = check_repo_id(repo_id).split("/")
    return (root or models_dir()) / owner / name


def partial_folder(repo_id: str, root: Path | None = None) -> Path:
    owner, name = check_repo_id(repo_id).split("/")
    return (root or models_dir()) / ".partial" / f"{owner}--{name}"


def progress_tqdm_class(report: Callable[[int], None], cancel: threading.Event) -> type:
    """A tqdm look-alike for snapshot_download: reports bytes, raises when cancel is set.

    Not a tqdm subclass, so the hub's own terminal detection cannot switch it off. The hub feeds
    the same bytes to a "transfer" and a "reconstruct" bar; the larger of the two is reported.
    """
    lock = threading.Lock()
    counts: dict[int, int] = {}

    class _Bar:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if cancel.is_set():
                raise DownloadCancelled()
            self.total = kwargs.get("total")
            self.n = kwargs.get("initial", 0) or 0
            self.bytes = kwargs.get("unit") == "B"
            self.desc = kwargs.get("desc", "")

        def update(self, n: int | float | None = 1) -> None:
            if cancel.is_set():
                raise DownloadCancelled()
            self.n += n or 0
            if self.bytes:
                with lock:
                    counts[id(self)] = int(self.n)
                    done = max(counts.values())
                report(done)

        @property
        def format_dict(self) -> dict[str, Any]:
            return {"n": self.n, "total": self.total, "rate": None}

        def __enter__(self) -> _Bar:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()

        def __getattr__(self, name: str) -> Callable[..., None]:
            return lambda *a, **k: None  # refresh, close, set_description, set_postfix_str, ...

    return _Bar


def _list_files(repo_id: str, revision: str | None, endpoint: str | None) -> dict[str, int]:
    """name -> size of the files to fetch; refuses escaping names and pickle-only repos."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    api = HfApi(endpoint=endpoint)
    entries = api.list_repo_tree(repo_id, recursive=True, revision=revision)
    files = {e.path: int(e.size or 0) for e in entries if isinstance(e, RepoFile)}
    for name in files:
        check_relative_name(name)
    wanted = {
        n: s for n, s in files.items() if any(fnmatch.fnmatch(n.rsplit("/", 1)[-1], p) for p in ALLOWED)
    }
    if not any(n.endswith(".safetensors") for n in wanted):
        pickles = [n for n in files if n.endswith((".bin", ".pt", ".pth"))]
        why = "it has only pickle weights" if pickles else "it has no .safetensors weights"
        raise DownloadError(f"{repo_id} cannot be used: {why} (SpecChat loads safetensors only)")
    return wanted


def download(
    repo_id: str,
    *,
    progress: Callable[[DownloadProgress], None] = lambda p: None,
    cancel: threading.Event | None = None,
    endpoint: str | None = None,
    revision: str | None = None,
    root: Path | None = None,
) -> Path:
    """Fetch `repo_id` into <models>/<owner>/<name>; returns that folder. Blocking: run it off the UI thread."""
    cancel = cancel or threading.Event()
    final = destination(repo_id, root)
    if (final / "config.json").is_file():
        return final
    if offline():
        raise DownloadError(f"offline mode is on (HF_HUB_OFFLINE) and {repo_id} has not been downloaded")
    from huggingface_hub import snapshot_download

    partial = partial_folder(repo_id, root)
    try:
        files = _list_files(repo_id, revision, endpoint)
        total = sum(files.values())
        started, last = time.monotonic(), 0.0

        def report(done: int) -> None:
            nonlocal last
            now = time.monotonic()
            if now - last >= REPORT_EVERY:
                last = now
                progress(DownloadProgress(repo_id, done, total, done / max(now - started, 1e-6)))

        partial.mkdir(parents=True, exist_ok=True)
        snapshot_download(
            repo_id,
            revision=revision,
            local_dir=partial,
            endpoint=endpoint,
            allow_patterns=sorted(files),
            tqdm_class=progress_tqdm_class(report, cancel),
            max_workers=4,
        )
    except (DownloadCancelled, DownloadError, UnsafeModel):
        raise
    except Exception as exc:
        if cancel.is_set():
            raise DownloadCancelled() from exc
        raise DownloadError(f"downloading {repo_id} failed: {exc}") from exc
    missing = [n for n in files if not (partial / n).is_file()]
    if missing or not (partial / "config.json").is_file() or weight_problem(partial):
        raise DownloadError(
            f"downloading {repo_id} left an incomplete folder (missing {missing[:3] or 'config.json'})"
        )
    shutil.rmtree(partial / ".cache", ignore_errors=True)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(partial, final)
    elapsed = max(time.monotonic() - started, 1e-6)
    progress(DownloadProgress(repo_id, total, total, total / elapsed, finished=True))
    return final
