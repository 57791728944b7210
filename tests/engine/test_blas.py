"""The BLAS loader: it picks OpenBLAS where there is one, and falls back to MLX's own silently.

Each case runs in a fresh interpreter, so the order of loading the library and importing MLX is
the real one. What MLX's CPU build will call is read from the dynamic linker: the global
definition of `cblas_sgemm` (dladdr names its file) is the one MLX's library binds to.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.blas import BUILTIN, BlasStatus, candidates, ensure_blas, find_blas

ROOT = Path(__file__).parents[2]
LINUX = sys.platform.startswith("linux")
PROBE = """
import ctypes, json, sys
{before}
from app.engine.blas import ensure_blas
status = ensure_blas()
import mlx.core as mx
mx.eval(mx.ones((64, 64)) @ mx.ones((64, 64)))

class Info(ctypes.Structure):
    _fields_ = [("file", ctypes.c_char_p), ("base", ctypes.c_void_p),
                ("symbol", ctypes.c_char_p), ("address", ctypes.c_void_p)]

scope = ctypes.CDLL(None)
try:
    address = ctypes.cast(scope.cblas_sgemm, ctypes.c_void_p)
except AttributeError:
    bound = None
else:
    info = Info()
    scope.dladdr(address, ctypes.byref(info))
    bound = info.file.decode()
print(json.dumps({{"name": status.name, "path": status.path, "note": status.note, "bound": bound}}))
"""


def probe(blas: str | None, before: str = "") -> dict[str, str | None]:
    env = {k: v for k, v in os.environ.items() if k != "SPECCHAT_BLAS"}
    if blas is not None:
        env["SPECCHAT_BLAS"] = blas
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(before=before)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # silent, whatever it found
    return json.loads(done.stdout)


def installed() -> Path:
    found = find_blas()
    if not LINUX or found is None:
        pytest.skip("no OpenBLAS on this machine (Debian/Ubuntu: apt install libopenblas0-pthread)")
    return found


def test_the_first_library_present_is_chosen(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "libopenblas.so.0", tmp_path / "b" / "libopenblas.so.0"
    second.parent.mkdir()
    second.write_bytes(b"")
    assert find_blas([first, second]) == second
    first.parent.mkdir()
    first.write_bytes(b"")
    assert find_blas([first, second]) == first
    assert find_blas([tmp_path / "missing.so"]) is None


def test_debian_paths_follow_the_machine() -> None:
    paths = [str(p) for p in candidates("aarch64")]
    assert paths[0] == "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0"
    assert all("libblas.so" not in p for p in paths)  # may be the reference BLAS behind alternatives


@pytest.mark.skipif(not LINUX, reason="MLX uses Accelerate on macOS; nothing is loaded")
def test_found_library_is_what_mlx_calls() -> None:
    path = installed()
    found = probe(None)
    assert found["path"] == str(path), "the probe finds the library at its path"
    assert found["name"].startswith("OpenBLAS"), "it is OpenBLAS"  # type: ignore[union-attr]
    assert found["bound"] is not None and os.path.realpath(found["bound"]) == os.path.realpath(path)
    chosen = probe(str(path))
    assert chosen["path"] == str(path), "asking for the path chooses it"
    assert chosen["bound"] == found["bound"], "the same library is bound"


@pytest.mark.skipif(not LINUX, reason="MLX uses Accelerate on macOS; nothing is loaded")
@pytest.mark.parametrize(
    ("blas", "note"),
    [("none", "SPECCHAT_BLAS=none"), ("/no/such/libopenblas.so.0", "no file /no/such/libopenblas.so.0")],
)
def test_falls_back_silently_to_mlx_s_own(blas: str, note: str) -> None:
    result = probe(blas)
    assert (result["name"], result["path"], result["bound"]) == (BUILTIN, None, None)
    assert note in str(result["note"])


@pytest.mark.skipif(not LINUX, reason="MLX uses Accelerate on macOS; nothing is loaded")
def test_a_library_without_blas_symbols_is_refused() -> None:
    libc = next(
        p
        for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib/libc.so.6")
        if Path(p).is_file()
    )
    result = probe(libc)
    assert result["path"] is None, "a library without cblas_sgemm is not used"
    assert "lacks cblas_sgemm" in str(result["note"]), "the note says what it lacks"


@pytest.mark.skipif(not LINUX, reason="MLX uses Accelerate on macOS; nothing is loaded")
def test_too_late_says_so_instead_of_pretending() -> None:
    installed()
    result = probe(None, before="import mlx.core")
    assert result["path"] is None and result["bound"] is None
    assert "MLX was imported before" in str(result["note"])


def test_descriptions_name_the_library_or_the_reason() -> None:
    fast = BlasStatus("OpenBLAS 0.3.21 (Haswell, pthreads)", "/usr/lib/libopenblas.so.0")
    assert fast.optimized, "OpenBLAS counts as optimized"
    assert fast.describe() == "OpenBLAS 0.3.21 (Haswell, pthreads) (/usr/lib/libopenblas.so.0)", (
        "its description names the library and its path"
    )
    assert fast.advice() == ""
    slow = BlasStatus(BUILTIN, note="no OpenBLAS found on this machine")
    assert not slow.optimized, "the built-in BLAS does not count as optimized"
    assert slow.describe() == f"{BUILTIN} (no OpenBLAS found on this machine)", (
        "its description says OpenBLAS was not found"
    )
    assert ("libopenblas0-pthread" in slow.advice()) == LINUX


@pytest.mark.skipif(not LINUX, reason="MLX uses Accelerate on macOS; nothing is loaded")
def test_the_test_session_itself_runs_on_the_library_found() -> None:
    """tests/conftest.py loads it before any test module imports MLX, so the suite runs as users do."""
    path = installed()
    if os.environ.get("SPECCHAT_BLAS"):
        pytest.skip("SPECCHAT_BLAS chooses for this session")
    assert ensure_blas().path == str(path), ensure_blas().describe()
