"""Downloads through huggingface_hub's real code against a local hub over HTTP."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.engine.library.download import (
    DownloadCancelled,
    DownloadError,
    DownloadProgress,
    destination,
    download,
    lock_file,
    partial_folder,
)
from app.engine.library.facts import compute_facts
from app.engine.library.safety import UnsafeModel
from tests.engine.library.hubserver import HubState, LocalHub

REPO = "toy-org/toy-main"


@pytest.fixture
def repo_files(toy_models) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in Path(toy_models.main).iterdir() if p.is_file()}
    files["pytorch_model.bin"] = b"pickle weights that must never be fetched"
    return files


def run(hub: LocalHub, root: Path, **kwargs) -> tuple[Path, list[DownloadProgress]]:
    seen: list[DownloadProgress] = []
    out = download(REPO, endpoint=hub.endpoint, root=root, progress=seen.append, **kwargs)
    return out, seen


def test_download_lands_complete_with_progress(repo_files, tmp_path):
    state = HubState({REPO: repo_files})
    with LocalHub(state) as hub:
        out, seen = run(hub, tmp_path)
    assert out == destination(REPO, tmp_path)
    for name, body in repo_files.items():
        if name != "pytorch_model.bin":
            assert (out / name).read_bytes() == body
    assert not (out / "pytorch_model.bin").exists() and not (out / ".cache").exists()
    assert not partial_folder(REPO, tmp_path).exists()
    assert seen[-1].finished and seen[-1].done_bytes == seen[-1].total_bytes
    assert seen[-1].total_bytes == sum(len(b) for n, b in repo_files.items() if n != "pytorch_model.bin")
    assert seen[-1].bytes_per_second > 0
    assert compute_facts(out).usable
    assert not any(p.endswith("pytorch_model.bin") for _, p, _ in state.log)


def test_truncated_file_is_resumed_with_a_range_request(repo_files, tmp_path):
    state = HubState({REPO: repo_files}, faults={"model.safetensors": "truncate_once"})
    with LocalHub(state) as hub:
        out, _ = run(hub, tmp_path)
    assert (out / "model.safetensors").read_bytes() == repo_files["model.safetensors"]
    half = len(repo_files["model.safetensors"]) // 2
    ranges = [r for m, p, r in state.log if m == "GET" and p.endswith("model.safetensors") and r]
    assert len(ranges) == 1
    start = int(ranges[0].removeprefix("bytes=").rstrip("-"))
    assert 0 < start <= half  # resumed from the bytes already written, not from zero


def test_a_server_that_ignores_the_range_still_gives_the_exact_file(repo_files, tmp_path):
    """A resume answered with the whole body from byte 0 must overwrite, not follow, the prefix."""
    state = HubState({REPO: repo_files}, faults={"model.safetensors": "truncate_then_whole"})
    with LocalHub(state) as hub:
        out, _ = run(hub, tmp_path)
    assert (out / "model.safetensors").read_bytes() == repo_files["model.safetensors"]


def test_interrupted_download_resumes_where_it_stopped_on_the_next_run(repo_files, tmp_path):
    state = HubState({REPO: repo_files}, faults={"model.safetensors": "truncate_then_503"})
    with LocalHub(state) as hub, pytest.raises(DownloadError):
        run(hub, tmp_path)
    assert not destination(REPO, tmp_path).exists()
    assert not (partial_folder(REPO, tmp_path) / "model.safetensors").exists()
    (kept,) = partial_folder(REPO, tmp_path).rglob("model.safetensors*")
    body = repo_files["model.safetensors"]
    held = kept.stat().st_size
    assert 0 < held <= len(body) // 2, "a stopped download keeps what it fetched, up to half"
    assert kept.read_bytes() == body[:held], "the kept part is the file's start, byte for byte"

    state.faults.clear()
    state.log.clear()
    state.sent.clear()
    with LocalHub(state) as hub:
        out, _ = run(hub, tmp_path)
    assert (out / "model.safetensors").read_bytes() == body
    gets = [(p.rsplit("/", 1)[-1], r) for m, p, r in state.log if m == "GET" and "/resolve/" in p]
    assert gets == [("model.safetensors", f"bytes={held}-")]  # only what was missing
    assert state.sent == {"model.safetensors": len(body) - held}
    assert not (out / ".parts").exists()


def test_cancel_leaves_nothing_that_looks_complete(repo_files, tmp_path):
    cancel = threading.Event()
    state = HubState({REPO: repo_files})
    with LocalHub(state) as hub, pytest.raises(DownloadCancelled):
        download(REPO, endpoint=hub.endpoint, root=tmp_path, cancel=cancel, progress=lambda p: cancel.set())
    assert not destination(REPO, tmp_path).exists()


def test_offline_mode_is_respected(repo_files, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    state = HubState({REPO: repo_files})
    with LocalHub(state) as hub, pytest.raises(DownloadError, match="offline"):
        run(hub, tmp_path)
    assert state.log == []


def test_pickle_only_repo_is_refused(tmp_path):
    state = HubState({REPO: {"config.json": b"{}", "pytorch_model.bin": b"x"}})
    with LocalHub(state) as hub, pytest.raises(DownloadError, match="only pickle weights"):
        run(hub, tmp_path)
    assert not destination(REPO, tmp_path).exists()


@pytest.mark.parametrize("bad", ["../evil.json", "sub/../../evil.json", "/etc/evil.json"])
def test_escaping_file_names_are_refused(tmp_path, bad):
    state = HubState({REPO: {"config.json": b"{}", "model.safetensors": b"x", bad: b"{}"}})
    with LocalHub(state) as hub, pytest.raises(UnsafeModel):
        run(hub, tmp_path)
    assert not any(p.name == "evil.json" for p in tmp_path.rglob("*"))


@pytest.mark.parametrize("bad", ["noslash", "../x/y", "a/b/c", "owner/..", "-a/b", "a/b.git", "own er/x"])
def test_invalid_repo_ids_are_refused(tmp_path, bad):
    with pytest.raises(UnsafeModel):
        download(bad, endpoint="http://127.0.0.1:9", root=tmp_path)


def test_a_flipped_byte_is_refused_and_nothing_reaches_the_library(repo_files, tmp_path):
    state = HubState({REPO: repo_files}, faults={"model.safetensors": "flip"})
    with LocalHub(state) as hub, pytest.raises(DownloadError) as refused:
        run(hub, tmp_path)
    assert str(refused.value) == (
        "model.safetensors is damaged (its checksum does not match the hub's);"
        " nothing was added to the library — try again"
    )
    assert not destination(REPO, tmp_path).exists()
    staged = [p.name for p in partial_folder(REPO, tmp_path).rglob("*")]
    assert not any(n.startswith("model.safetensors") for n in staged)  # the bad bytes are gone
    assert "config.json" in staged  # good files stay for the retry

    state.faults.clear()
    state.log.clear()
    with LocalHub(state) as hub:
        out, seen = run(hub, tmp_path)
    assert (out / "model.safetensors").read_bytes() == repo_files["model.safetensors"]
    refetched = {p.rsplit("/", 1)[-1] for m, p, _ in state.log if m == "GET" and "/resolve/" in p}
    assert refetched == {"model.safetensors"}
    checking = [p for p in seen if p.phase == "checking"]
    assert checking and checking[0].total_bytes == seen[-1].total_bytes


def test_a_small_file_is_checked_against_its_git_blob_id(repo_files, tmp_path):
    state = HubState({REPO: repo_files}, faults={"config.json": "flip"})
    with LocalHub(state) as hub, pytest.raises(DownloadError, match=r"^config\.json is damaged"):
        run(hub, tmp_path)
    assert not destination(REPO, tmp_path).exists()


def test_two_downloads_of_one_model_at_once_both_get_the_model(repo_files, tmp_path):
    gate = threading.Event()
    state = HubState({REPO: repo_files}, gates={"model.safetensors": gate})
    results: dict[str, object] = {}
    second_waits = threading.Event()

    def second_progress(p: DownloadProgress) -> None:
        if p.phase == "waiting":
            second_waits.set()

    def call(name: str, progress) -> None:
        try:
            results[name] = download(REPO, endpoint=hub.endpoint, root=tmp_path, progress=progress)
        except Exception as exc:  # recorded: the test fails on it below
            results[name] = exc

    with LocalHub(state) as hub:
        first = threading.Thread(target=call, args=("first", lambda p: None))
        first.start()
        while not state.gets.get("model.safetensors") and first.is_alive():
            threading.Event().wait(0.01)  # until the first download is under way
        second = threading.Thread(target=call, args=("second", second_progress))
        second.start()
        second_waits.wait(timeout=5)
        gate.set()
        first.join(timeout=60)
        second.join(timeout=60)
    assert results == {"first": destination(REPO, tmp_path), "second": destination(REPO, tmp_path)}
    assert state.gets["model.safetensors"] == 1  # the second waited instead of fetching again


def test_a_download_held_by_another_process_is_refused_in_words(repo_files, tmp_path):
    import fcntl

    lock = lock_file(REPO, tmp_path)
    lock.parent.mkdir(parents=True)
    state = HubState({REPO: repo_files})
    with lock.open("a") as other, LocalHub(state) as hub:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(DownloadError, match="already downloading"):
            run(hub, tmp_path)
    assert state.log == [], "a second download of the same model fetches nothing"
    assert not destination(REPO, tmp_path).exists(), "and leaves no folder behind"


def _everything_but_this_download(root: Path) -> dict[str, tuple[int, int]]:
    mine = partial_folder(REPO, root)
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and mine not in p.parents and p != lock_file(REPO, root)
    }


@pytest.mark.parametrize("fault", ["endless", "oversized"])
def test_a_server_sending_more_than_listed_is_refused_and_its_partial_file_removed(
    repo_files, tmp_path, fault
):
    """Bytes written past the listed size plus one chunk fail outright (RLIMIT_FSIZE), so a
    downloader that keeps writing cannot pass; the server's count shows it stopped reading."""
    import resource

    from huggingface_hub import constants

    listed = 2_000_000
    # The size limit is the process's, so no other file of this download may be larger than it.
    small = {n: b for n, b in repo_files.items() if not n.endswith(".safetensors")}
    files = dict(small, **{"big.safetensors": bytes(range(256)) * (listed // 256)})
    listed = len(files["big.safetensors"])
    (tmp_path / "other-org" / "kept").mkdir(parents=True)
    (tmp_path / "other-org" / "kept" / "config.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("mine")
    before = _everything_but_this_download(tmp_path)
    state = HubState({REPO: files}, faults={"big.safetensors": fault})
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (listed + constants.DOWNLOAD_CHUNK_SIZE, hard))
    try:
        with LocalHub(state) as hub, pytest.raises(DownloadError) as refused:
            run(hub, tmp_path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    reason = str(refused.value)
    assert "\n" not in reason and reason.startswith("big.safetensors is larger than the hub lists (2.0 MB)")
    assert state.sent.get("big.safetensors", 0) < state.cap, (
        "the download stopped reading the oversized file"
    )  # it stopped reading
    assert not destination(REPO, tmp_path).exists()
    assert not any(p.name.startswith("big.safetensors") for p in tmp_path.rglob("*"))
    assert _everything_but_this_download(tmp_path) == before
