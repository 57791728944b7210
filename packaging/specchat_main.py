"""Entry point of the frozen app (PyInstaller runs this file as the bundle's main script).

A frozen executable has no Python interpreter to hand `-m`, yet parts of SpecChat start child
processes as `sys.executable -m app.<module> ...` (the GGUF importer, for one). Here that form is
recognised and the module runs in this process; every other command line goes to `app.cli`.
"""

from __future__ import annotations

import runpy
import sys


def main() -> int:
    from app.engine.blas import ensure_blas
    from app.engine.kernel_cache import keep_compiled_kernels, shape_generic_attention

    ensure_blas()  # before the module or command imports MLX: only then can MLX use it
    keep_compiled_kernels()  # before the first GPU pass compiles anything
    shape_generic_attention()  # likewise: attention then builds nothing per shape
    argv = sys.argv[1:]
    if len(argv) >= 2 and argv[0] == "-m" and argv[1].split(".")[0] == "app":
        module = argv[1]
        sys.argv = [sys.argv[0], *argv[2:]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    from app.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
