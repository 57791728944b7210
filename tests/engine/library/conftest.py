"""Real-model folders for library tests, without weights when no MLX import exists yet.

A fixture's imported MLX folder (`python -m app fetch-models`) is used when present. Otherwise
the tokenizer and config are rebuilt from the cached GGUF into a "metadata-only" folder whose
safetensors file holds only a header (real tensor shapes, no data): everything the library
reads, none of what it never reads. Tests skip, saying how to fetch, when neither exists.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from app.engine.gguf.fixtures import FIXTURES, gguf_path, mlx_path


def write_header_only_safetensors(
    path: Path, tensors: dict[str, tuple[int, ...]], dtype: str = "F16"
) -> None:
    header, offset = {}, 0
    for name, shape in tensors.items():
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def metadata_folder(key: str, out: Path) -> Path:
    from app.engine.gguf.architectures import model_config
    from app.engine.gguf.header import read_header
    from app.engine.gguf.tokenizer import build_tokenizer, tokenizer_config

    header = read_header(gguf_path(key))
    out.mkdir(parents=True, exist_ok=True)
    config = model_config(header)
    config["torch_dtype"] = "float16"
    (out / "config.json").write_text(json.dumps(config, indent=2))
    build_tokenizer(header).save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(header), ensure_ascii=False))
    shapes = {t.name: tuple(reversed(t.shape)) for t in header.tensors}
    write_header_only_safetensors(out / "model.safetensors", shapes)
    return out


@pytest.fixture(scope="session")
def real_model(tmp_path_factory: pytest.TempPathFactory):
    """real_model(key) -> an MLX-style folder for that fixture, or a skip with the reason."""
    made: dict[str, Path] = {}

    def get(key: str) -> Path:
        for bits in (4, 8, 16):
            if (mlx_path(key, bits) / "config.json").is_file():
                return mlx_path(key, bits)
        if key in made:
            return made[key]
        source = gguf_path(key)
        if not source.is_file() or source.stat().st_size != FIXTURES[key].size:
            pytest.skip(
                f"{FIXTURES[key].name} is not in the model cache: run `python -m app fetch-models --models {key}`"
            )
        made[key] = metadata_folder(key, tmp_path_factory.mktemp("real") / key)
        return made[key]

    return get


@pytest.fixture(autouse=True)
def specchat_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own app-data folder, so caches never leak between tests."""
    home = tmp_path / "specchat-home"
    monkeypatch.setenv("SPECCHAT_HOME", str(home))
    return home
