"""Keep the GPU kernels MLX compiles on Linux (CUDA) across runs of the app.

MLX's CUDA backend compiles kernels at run time for each new shape family and saves them under
the system's temporary folder, which a reboot empties: a large pair's warm-up then spends
minutes compiling again.
Pointing `MLX_PTX_CACHE_DIR` at a folder in the user's cache makes that a once-per-machine
cost. MLX reads the variable when it first compiles, so this must run before any pass; a value
the user set is kept. Metal (macOS) ships its kernels prebuilt and needs nothing here.

The same backend hands attention to cuDNN, which builds a new execution plan for every (query
length, key length) it meets, in memory only, tens of milliseconds each: a warm-up over every
shape takes more than twice as long as without it. MLX's own attention (its vector kernel for
short queries, matrix products otherwise) needs nothing per shape and decodes as fast.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

VARIABLE = "MLX_PTX_CACHE_DIR"
CUDNN_ATTENTION = "MLX_CUDA_USE_CUDNN_SDPA"


def kernel_cache_dir() -> Path:
    """Per MLX version: kernels compiled by one version are not read by another."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    try:
        version = metadata.version("mlx")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return Path(base).expanduser() / "specchat" / "mlx-kernels" / version


def keep_compiled_kernels() -> Path | None:
    """Set MLX's kernel cache folder on Linux unless already set; the folder, or None."""
    if not sys.platform.startswith("linux"):
        return None
    if os.environ.get(VARIABLE):
        return Path(os.environ[VARIABLE])
    folder = kernel_cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # an unwritable home: MLX keeps its temporary-folder default
    os.environ[VARIABLE] = str(folder)
    return folder


def shape_generic_attention() -> bool:
    """Have MLX's CUDA backend attend with its own kernels rather than cuDNN's plans built per
    shape, on Linux, unless the user chose; whether cuDNN's attention is now off. MLX reads the
    variable at its first attention, so this must run before any pass."""
    if not sys.platform.startswith("linux"):
        return False
    os.environ.setdefault(CUDNN_ATTENTION, "0")
    return os.environ[CUDNN_ATTENTION] == "0"
