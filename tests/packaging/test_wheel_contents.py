"""The wheel ships what users run and none of the developers' lab: built from a copy of the
checkout (so the tree gets no build/ folder), then its file list read back."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _can_build_wheels() -> bool:
    """setuptools before 70.1 builds wheels only with the `wheel` package beside it."""
    import setuptools

    major, minor = (int(part) for part in setuptools.__version__.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    if not _can_build_wheels():
        pytest.skip("cannot build a wheel here: setuptools is older than 70.1 and `wheel` is not installed")
    source = tmp_path_factory.mktemp("checkout")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("app", "lab"):  # the lab is copied too, so leaving it out is the wheel's doing
        shutil.copytree(ROOT / package, source / package, ignore=ignore)
    out = source / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            ".",
        ],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = out.glob("specchat-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_ships_the_app_and_what_users_run(wheel_files: list[str]) -> None:
    for needed in (
        "app/__main__.py",
        "app/cli/bench.py",
        "app/engine/measure/bench.py",
        "app/engine/measure/agreement.py",
        "app/engine/measure/toy.py",
    ):
        assert needed in wheel_files, f"{needed} is missing from the wheel"


def test_the_wheel_leaves_the_lab_out(wheel_files: list[str]) -> None:
    modules = [name for name in wheel_files if name.endswith(".py")]
    tops = {name.split("/")[0] for name in modules}
    assert tops == {"app"}, f"top-level packages in the wheel: {sorted(tops)}"
    lab_like = [
        name
        for name in modules
        if any(part in ("gpu", "sharded") for part in name.split("/"))
        or Path(name).stem in ("replay", "recording", "simulate", "stop_latency")
    ]
    assert lab_like == [], f"lab modules in the wheel: {lab_like}"
