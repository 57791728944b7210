"""Downloading a model repo from the hub into SpecChat's models folder, with progress and cancel.

Each file is fetched with huggingface_hub's `http_get` (retries, Range resumes inside a run) into
a `.part` file of a hidden `.partial` folder that survives a failed or cancelled run, so the next
run asks the server only for the missing bytes. Once every file arrived it is hashed against the
checksum in the hub's listing, and only then does the folder move into place, so a damaged,
cancelled or failed download never looks like a complete model. No file is written past the
size the listing gives it: a server that sends more is refused and its part file removed.
"""

from __future__ import annotations

import fcntl
import fnmatch
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from app.engine.library.checksum import RemoteFile, matches
from app.engine.library.paths import models_dir
from app.engine.library.reachability import hub_host, is_connection_failure, offline_message, unreachable
from app.engine.library.safety import UnsafeModel, check_relative_name, check_repo_id, weight_problem

# Only metadata, tokenizers and safetensors are fetched: pickle weights are never downloaded.
ALLOWED = ("*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken", "*.md")
REPORT_EVERY = 0.1  # seconds between progress reports
PARTS = ".parts"  # inside the partial folder: files still arriving or not yet checked
WORKERS = 4

Phase = Literal["waiting", "downloading", "checking"]


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
    phase: Phase = "downloading"  # "checking": the bytes are those hashed so far


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


def lock_file(repo_id: str, root: Path | None = None) -> Path:
    """Held while a process downloads `repo_id`; beside the partial folder, which moves away."""
    folder = partial_folder(repo_id, root)
    return folder.with_name(folder.name + ".lock")


def part_file(partial: Path, remote: RemoteFile) -> Path:
    """Where `remote` accumulates; named by its checksum so a file changed on the hub starts over."""
    return partial / PARTS / f"{remote.name.replace('/', '--')}.{remote.expected[:16]}.part"


_guard = threading.Lock()
_running: dict[Path, threading.Lock] = {}


@contextmanager
def one_at_a_time(
    repo_id: str, root: Path | None, cancel: threading.Event, waiting: Callable[[], None]
) -> Iterator[None]:
    """Holds the download of `repo_id`: a second caller in this process waits for the first (it can
    still cancel); another process holding it is refused in words rather than with a lock error."""
    key = destination(repo_id, root).absolute()
    with _guard:
        lock = _running.setdefault(key, threading.Lock())
    if not lock.acquire(blocking=False):
        waiting()
        while not lock.acquire(timeout=0.1):
            if cancel.is_set():
                raise DownloadCancelled()
    try:
        lock_path = lock_file(repo_id, root)
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with lock_path.open("a") as held:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise DownloadError(
                    f"{repo_id} is already downloading in another SpecChat window or command;"
                    " try again once it has finished"
                ) from None
            try:
                yield
            finally:
                fcntl.flock(held, fcntl.LOCK_UN)
    finally:
        lock.release()


class TooLong(DownloadError):
    """The server sent, or announced, more bytes than the hub lists for a file."""

    def __init__(self, name: str, listed: int) -> None:
        super().__init__(
            f"{name} is larger than the hub lists ({_size(listed)}): the server sent more, so the"
            " download was stopped and the unfinished file removed"
        )


def _size(n: int) -> str:
    return f"{n:,} bytes" if n < 10**6 else f"{n / 1e6:.1f} MB"


def _bar_class(count: Callable[[int], None], check: Callable[[], None], name: str, listed: int) -> type:
    """A tqdm look-alike for one file's http_get: reports its bytes so far, raises once stopped.

    http_get updates the bar before it writes each chunk, so refusing here when the bytes pass
    the listed size keeps that chunk, and every later one, off the disk; a larger length in the
    response's headers is refused before the first byte.
    Not a tqdm subclass, so the hub's own terminal detection cannot switch it off.
    """

    class _Bar:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            check()
            self.total = kwargs.get("total")
            self.n = kwargs.get("initial", 0) or 0
            if (self.total or 0) > listed or self.n > listed:
                raise TooLong(name, listed)
            count(int(self.n))

        def update(self, n: int | float | None = 1) -> None:
            check()
            self.n += n or 0
            if self.n > listed:
                raise TooLong(name, listed)
            count(int(self.n))

        @property
        def format_dict(self) -> dict[str, Any]:
            return {"n": self.n, "total": self.total, "rate": None}

        def __enter__(self) -> _Bar:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()

        def __getattr__(self, name: str) -> Callable[..., None]:
            return lambda *a, **k: None  # refresh, close, set_description, update_transfer, ...

    return _Bar


def _list_files(
    repo_id: str, revision: str | None, endpoint: str | None
) -> tuple[str, dict[str, RemoteFile]]:
    """The commit and the files to fetch; refuses escaping names and pickle-only repos."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    api = HfApi(endpoint=endpoint)
    commit = api.model_info(repo_id, revision=revision).sha or revision or "main"
    entries = api.list_repo_tree(repo_id, recursive=True, revision=commit)
    files = {
        e.path: RemoteFile(e.path, int(e.size or 0), e.lfs.sha256 if e.lfs else None, e.blob_id)
        for e in entries
        if isinstance(e, RepoFile)
    }
    for name in files:
        check_relative_name(name)
    wanted = {
        n: f for n, f in files.items() if any(fnmatch.fnmatch(n.rsplit("/", 1)[-1], p) for p in ALLOWED)
    }
    if not any(n.endswith(".safetensors") for n in wanted):
        pickles = [n for n in files if n.endswith((".bin", ".pt", ".pth"))]
        why = "it has only pickle weights" if pickles else "it has no .safetensors weights"
        raise DownloadError(f"{repo_id} cannot be used: {why} (SpecChat loads safetensors only)")
    return commit, wanted


class _Reporter:
    """Throttled progress for one phase; thread-safe, since files arrive on several threads."""

    def __init__(self, repo_id: str, total: int, phase: Phase, progress: Callable[[DownloadProgress], None]):
        self.repo_id, self.total, self.phase, self.progress = repo_id, total, phase, progress
        self.lock, self.started, self.last = threading.Lock(), time.monotonic(), 0.0
        self.first: int | None = None  # bytes held before this run, left out of the rate

    def __call__(self, done: int, force: bool = False) -> None:
        with self.lock:
            now = time.monotonic()
            self.first = done if self.first is None else self.first
            if not force and now - self.last < REPORT_EVERY:
                return
            self.last = now
            rate = (done - self.first) / max(now - self.started, 1e-6)
            self.progress(DownloadProgress(self.repo_id, done, self.total, rate, phase=self.phase))


def _transfer(
    repo_id: str,
    commit: str,
    files: list[RemoteFile],
    partial: Path,
    endpoint: str | None,
    report: _Reporter,
    cancel: threading.Event,
) -> None:
    """Fetch `files` into their part files, resuming each from the bytes it already holds."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]  # lazily exported

    stop = threading.Event()  # one file failing stops the others
    already = report.total - sum(f.size for f in files)  # files fetched and checked in earlier runs
    counts: dict[str, int] = {}
    lock = threading.Lock()

    def check() -> None:
        if cancel.is_set() or stop.is_set():
            raise DownloadCancelled()

    def fetch(remote: RemoteFile) -> None:
        def count(n: int) -> None:
            with lock:
                counts[remote.name] = n
                done = already + sum(counts.values())
            report(done)

        url = hf_hub_url(repo_id, remote.name, revision=commit, endpoint=endpoint)
        part = part_file(partial, remote)
        try:
            with part.open("ab") as out:
                http_get(
                    url,
                    out,
                    resume_size=counts[remote.name],
                    headers=build_hf_headers(),
                    expected_size=remote.size,
                    displayed_filename=remote.name,
                    tqdm_class=cast(Any, _bar_class(count, check, remote.name, remote.size)),
                )
        except TooLong:
            part.unlink(missing_ok=True)  # what such a server sent is no prefix worth resuming
            raise

    for remote in files:
        part = part_file(partial, remote)
        part.parent.mkdir(parents=True, exist_ok=True)
        counts[remote.name] = part.stat().st_size if part.is_file() else 0
        if counts[remote.name] > remote.size:  # not a prefix of this file: start it over
            part.unlink()
            counts[remote.name] = 0
    report(already + sum(counts.values()), force=True)
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(fetch, f) for f in sorted(files, key=lambda f: -f.size)]
        try:
            for future in as_completed(futures):
                future.result()
        finally:
            stop.set()


def _check(files: list[RemoteFile], partial: Path, report: _Reporter, cancel: threading.Event) -> None:
    """Hash every file against the listing; a damaged one is deleted and the download refused."""
    done, damaged = 0, []

    def on_chunk(n: int) -> None:
        nonlocal done
        if cancel.is_set():
            raise DownloadCancelled()
        done += n
        report(done)

    for remote in files:
        target = partial / remote.name
        path = target if target.is_file() else part_file(partial, remote)
        if not matches(path, remote, on_chunk):
            path.unlink()
            damaged.append(remote.name)
        elif path != target:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
    if damaged:
        names = ", ".join(damaged[:3]) + (f" and {len(damaged) - 3} more" if len(damaged) > 3 else "")
        what = (
            "is damaged (its checksum does not match"
            if len(damaged) == 1
            else "are damaged (their checksums do not match"
        )
        raise DownloadError(f"{names} {what} the hub's); nothing was added to the library — try again")


def download(
    repo_id: str,
    *,
    progress: Callable[[DownloadProgress], None] = lambda p: None,
    cancel: threading.Event | None = None,
    endpoint: str | None = None,
    revision: str | None = None,
    root: Path | None = None,
) -> Path:
    """Fetch `repo_id` into <models>/<owner>/<name>; returns that folder. Blocking: run it off the UI thread.

    A second call for the same repo while one runs waits for it and returns its folder.
    """
    cancel = cancel or threading.Event()
    final = destination(repo_id, root)
    if (final / "config.json").is_file():
        return final
    if offline():
        raise DownloadError(f"offline mode is on (HF_HUB_OFFLINE) and {repo_id} has not been downloaded")
    problem = unreachable(endpoint)  # seconds, not the HTTP client's retries, to say "offline"
    if problem is not None:
        raise DownloadError(problem)
    waiting = DownloadProgress(repo_id, 0, 0, 0.0, phase="waiting")
    with one_at_a_time(repo_id, root, cancel, lambda: progress(waiting)):
        if not (final / "config.json").is_file():  # else the download this call waited for made it
            _download(repo_id, final, progress, cancel, endpoint, revision, root)
    return final


def _download(
    repo_id: str,
    final: Path,
    progress: Callable[[DownloadProgress], None],
    cancel: threading.Event,
    endpoint: str | None,
    revision: str | None,
    root: Path | None,
) -> None:
    partial = partial_folder(repo_id, root)
    started = time.monotonic()
    try:
        commit, listing = _list_files(repo_id, revision, endpoint)
        files = sorted(listing.values(), key=lambda f: f.name)
        total = sum(f.size for f in files)
        partial.mkdir(parents=True, exist_ok=True)
        todo = [f for f in files if not (partial / f.name).is_file()]
        fetching = _Reporter(repo_id, total, "downloading", progress)
        _transfer(repo_id, commit, todo, partial, endpoint, fetching, cancel)
        checking = _Reporter(repo_id, total, "checking", progress)
        checking(0, force=True)
        _check(files, partial, checking, cancel)
    except (DownloadCancelled, DownloadError, UnsafeModel):
        raise
    except Exception as exc:
        if cancel.is_set():
            raise DownloadCancelled() from exc
        if is_connection_failure(exc):
            raise DownloadError(offline_message(hub_host(endpoint)[0])) from exc
        raise DownloadError(f"downloading {repo_id} failed: {exc}") from exc
    missing = [f.name for f in files if not (partial / f.name).is_file()]
    if missing or not (partial / "config.json").is_file() or weight_problem(partial):
        raise DownloadError(
            f"downloading {repo_id} left an incomplete folder (missing {missing[:3] or 'config.json'})"
        )
    shutil.rmtree(partial / PARTS, ignore_errors=True)
    shutil.rmtree(partial / ".cache", ignore_errors=True)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(partial, final)
    elapsed = max(time.monotonic() - started, 1e-6)
    progress(DownloadProgress(repo_id, total, total, total / elapsed, finished=True))
