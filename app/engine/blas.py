"""An optimized BLAS for MLX's CPU build on Linux, loaded before MLX is.

MLX's Linux CPU wheel links the reference (netlib) BLAS, which reads a long prompt three to five
times slower than OpenBLAS. The wheel's library finds `cblas_sgemm` and LAPACK through the
dynamic linker's global scope first, so a BLAS loaded with RTLD_GLOBAL before `mlx.core` is
imported takes over every float32 matmul. `ensure_blas()` does that once per process and
records what is in use for the About dialog and the bench header; it never imports MLX itself.

`SPECCHAT_BLAS=/path/to/libopenblas.so.0` picks a library, `SPECCHAT_BLAS=none` keeps MLX's own.
On macOS MLX uses Accelerate, so nothing is loaded there.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

ENV = "SPECCHAT_BLAS"
BUILTIN = "MLX's built-in reference BLAS"
ACCELERATE = "Apple Accelerate (through MLX)"
DEBIAN_PACKAGE = "libopenblas0-pthread"
# Symbols MLX's CPU build takes from BLAS and LAPACK: a library lacking one would override half.
REQUIRED_SYMBOLS = ("cblas_sgemm", "sgemm_", "sgetrf_", "ssyevd_")
_PARALLEL = {0: "single-threaded", 1: "pthreads", 2: "OpenMP"}


@dataclass(frozen=True, slots=True)
class BlasStatus:
    """Which BLAS MLX uses in this process: `path` is None when it is MLX's own."""

    name: str
    path: str | None = None
    note: str = ""  # why no optimized BLAS is in use, when none is

    @property
    def optimized(self) -> bool:
        return self.path is not None

    def describe(self) -> str:
        """One line for people: the library and where it came from, or why it is MLX's own."""
        if self.path is not None:
            return f"{self.name} ({self.path})"
        return f"{self.name} ({self.note})" if self.note else self.name

    def advice(self) -> str:
        """What would make MLX faster here, when a Linux machine runs on the reference BLAS."""
        if self.optimized or self.name != BUILTIN or not sys.platform.startswith("linux"):
            return ""
        return f"`sudo apt install {DEBIAN_PACKAGE}` reads prompts 3 to 5 times faster; SpecChat finds it itself."


_status: BlasStatus | None = None


def candidates(machine: str | None = None) -> list[Path]:
    """Where distributions put OpenBLAS, threaded builds first. Plain `libblas.so.3` paths are
    left out: behind Debian's alternatives they may well be the reference BLAS again."""
    triplet = f"{machine or platform.machine()}-linux-gnu"
    debian = Path("/usr/lib") / triplet
    return [
        debian / "openblas-pthread" / "libopenblas.so.0",  # Debian, Ubuntu: libopenblas0-pthread
        debian / "openblas-openmp" / "libopenblas.so.0",
        debian / "libopenblas.so.0",  # Debian's alternatives link to whichever variant is chosen
        debian / "openblas-serial" / "libopenblas.so.0",
        Path("/usr/lib64/libopenblasp.so.0"),  # Fedora: pthreads, OpenMP, serial
        Path("/usr/lib64/libopenblaso.so.0"),
        Path("/usr/lib64/libopenblas.so.0"),
        Path("/usr/lib/libopenblas.so.0"),  # Arch and others
        Path("/usr/local/lib/libopenblas.so.0"),
    ]


def find_blas(paths: list[Path] | None = None) -> Path | None:
    """The first optimized BLAS present on this machine, or None."""
    return next((p for p in (candidates() if paths is None else paths) if p.is_file()), None)


def _describe_library(lib: ctypes.CDLL) -> str:
    """'OpenBLAS 0.3.21 (Haswell, pthreads)' from OpenBLAS's own report, or a generic name."""
    try:
        config, core, parallel = lib.openblas_get_config, lib.openblas_get_corename, lib.openblas_get_parallel
    except AttributeError:
        return "an optimized BLAS"
    config.restype = core.restype = ctypes.c_char_p
    config, core, parallel = config(), core(), parallel()
    words = (config or b"OpenBLAS").decode(errors="replace").split()
    details = [d for d in ((core or b"").decode(errors="replace"), _PARALLEL.get(parallel, "")) if d]
    return " ".join(words[:2]) + (f" ({', '.join(details)})" if details else "")


def _load(path: Path) -> BlasStatus:
    """Load `path` globally once it has shown the symbols MLX needs; MLX's own BLAS otherwise."""
    try:
        probe = ctypes.CDLL(str(path), mode=os.RTLD_LAZY | os.RTLD_LOCAL)
        missing = [s for s in REQUIRED_SYMBOLS if not hasattr(probe, s)]
        if missing:
            return BlasStatus(BUILTIN, note=f"{path} lacks {', '.join(missing)}")
        # a second dlopen of the same library with RTLD_GLOBAL makes its symbols global
        lib = ctypes.CDLL(str(path), mode=os.RTLD_LAZY | os.RTLD_GLOBAL)
    except OSError as exc:
        return BlasStatus(BUILTIN, note=f"{path} would not load: {exc}")
    return BlasStatus(_describe_library(lib), str(path))


def _decide() -> BlasStatus:
    if sys.platform == "darwin":
        return BlasStatus(ACCELERATE)
    if not sys.platform.startswith("linux"):
        return BlasStatus(BUILTIN)
    if "mlx.core" in sys.modules:
        return BlasStatus(BUILTIN, note="MLX was imported before SpecChat could load a faster BLAS")
    choice = os.environ.get(ENV, "").strip()
    if choice.lower() in ("none", "off", "0", "builtin"):
        return BlasStatus(BUILTIN, note=f"{ENV}={choice}")
    if choice:
        path = Path(choice)
        return _load(path) if path.is_file() else BlasStatus(BUILTIN, note=f"{ENV}: no file {choice}")
    found = find_blas()
    return _load(found) if found else BlasStatus(BUILTIN, note="no OpenBLAS found on this machine")


def ensure_blas() -> BlasStatus:
    """Load an optimized BLAS for MLX if one is found, once per process; call it before anything
    imports `mlx.core`. Never raises: anything that goes wrong leaves MLX's own BLAS, said so."""
    global _status
    if _status is None:
        _status = _decide()
    return _status
