"""`python -m app import-gguf FILE` without --out puts the model in the library the window lists,
and running it again finds the model there instead of failing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.engine.library.discovery import Sources, scan_library
from tests.engine.gguf.ggufbuild import tiny_llama

ROOT = Path(__file__).resolve().parents[2]


def import_gguf(path: Path, home: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SPECCHAT_HOME=str(home), SPECCHAT_MODEL_CACHE=str(cache), PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "app", "import-gguf", str(path), "--bits", "16"]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


def listed(models: Path) -> list[str]:
    facts, _ = scan_library(Sources(None, None, models, use_hub=False))
    return sorted(f.name for f in facts if f.usable)


def test_import_lands_in_the_library_and_again_finds_it(tmp_path: Path) -> None:
    home, cache = tmp_path / "home", tmp_path / "model-cache"
    (tmp_path / "a").mkdir()
    source = tiny_llama(tmp_path / "a" / "tiny.gguf")
    first = import_gguf(source, home, cache)
    assert first.returncode == 0, first.stderr
    folder = Path(first.stdout.strip())
    assert folder == home / "models" / "tiny-16bit"
    assert listed(home / "models") == ["tiny-16bit"]

    again = import_gguf(source, home, cache)
    assert again.returncode == 0, again.stderr
    assert "already in the library" in again.stderr
    assert Path(again.stdout.strip()) == folder
    assert listed(home / "models") == ["tiny-16bit"]
    assert not cache.exists()  # nothing went to the model cache


def test_another_file_of_the_same_name_gets_its_own_folder(tmp_path: Path) -> None:
    home, cache = tmp_path / "home", tmp_path / "model-cache"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert import_gguf(tiny_llama(tmp_path / "a" / "tiny.gguf"), home, cache).returncode == 0
    other = tmp_path / "b" / "tiny.gguf"
    other.write_bytes(tiny_llama(tmp_path / "b" / "x.gguf").read_bytes() + b"\0" * 64)  # a larger file
    done = import_gguf(other, home, cache)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == home / "models" / "tiny-16bit-2"
    assert listed(home / "models") == ["tiny-16bit", "tiny-16bit-2"]
