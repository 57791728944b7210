"""MLX's compiled GPU kernels are kept in the user's cache on Linux, unless the user chose a place,
and its CUDA backend attends with kernels that need no plan per shape, unless the user chose."""

from __future__ import annotations

import os
import sys

import pytest

from app.engine import kernel_cache
from app.engine.kernel_cache import CUDNN_ATTENTION, VARIABLE, keep_compiled_kernels, shape_generic_attention


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="MLX compiles kernels at run time on Linux only"
)
def test_kernels_go_to_a_folder_in_the_users_cache_per_mlx_version(tmp_path, monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = keep_compiled_kernels()
    assert folder is not None and folder.is_dir()
    assert folder.parent == tmp_path / "specchat" / "mlx-kernels"
    assert folder.name not in ("", "unknown")  # the installed MLX's version

    assert os.environ[VARIABLE] == str(folder)


def test_a_folder_the_user_set_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(VARIABLE, str(tmp_path / "mine"))
    monkeypatch.setattr(kernel_cache.sys, "platform", "linux")
    assert keep_compiled_kernels() == tmp_path / "mine"


def test_nothing_is_set_on_a_mac(monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    monkeypatch.setattr(kernel_cache.sys, "platform", "darwin")
    assert keep_compiled_kernels() is None

    assert VARIABLE not in os.environ


def test_an_unwritable_cache_leaves_mlx_its_default(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.delenv(VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setattr(kernel_cache.sys, "platform", "linux")
    assert keep_compiled_kernels() is None

    assert VARIABLE not in os.environ


def test_cuda_attention_is_mlxs_own_on_linux(monkeypatch):
    monkeypatch.delenv(CUDNN_ATTENTION, raising=False)
    monkeypatch.setattr(kernel_cache.sys, "platform", "linux")
    assert shape_generic_attention()

    assert os.environ[CUDNN_ATTENTION] == "0"


def test_a_user_who_asks_for_cudnn_attention_keeps_it(monkeypatch):
    monkeypatch.setenv(CUDNN_ATTENTION, "1")
    monkeypatch.setattr(kernel_cache.sys, "platform", "linux")
    assert not shape_generic_attention()

    assert os.environ[CUDNN_ATTENTION] == "1"


def test_attention_is_left_alone_on_a_mac(monkeypatch):
    monkeypatch.delenv(CUDNN_ATTENTION, raising=False)
    monkeypatch.setattr(kernel_cache.sys, "platform", "darwin")
    assert not shape_generic_attention()

    assert CUDNN_ATTENTION not in os.environ
