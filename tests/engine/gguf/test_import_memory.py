"""What the importer holds in memory: shards written as they fill, an estimate that covers what is
held at once, and a refusal that names the numbers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.engine.gguf import convert
from app.engine.gguf.header import GGUFHeader, TensorInfo, read_header
from tests.engine.gguf.conftest import need_gguf
from tests.engine.gguf.ggufbuild import tiny_llama

SHARD = 20_000  # bytes: two or three of the tiny model's tensors per shard


class HeldBytes:
    """Counts converted arrays from the moment they are evaluated until they are written: what the
    importer holds besides the tensor it is converting."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import mlx.core as mx

        self.live: dict[int, int] = {}
        self.peak = 0
        self.saves = 0
        real_eval, real_save = mx.eval, mx.save_safetensors

        def evaluate(*arrays: Any) -> None:
            real_eval(*arrays)
            self.live.update({id(a): int(a.nbytes) for a in arrays})
            self.peak = max(self.peak, sum(self.live.values()))

        def save(path: str, arrays: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            real_save(path, arrays, *args, **kwargs)
            self.saves += 1
            for a in arrays.values():
                self.live.pop(id(a), None)

        monkeypatch.setattr(mx, "eval", evaluate)
        monkeypatch.setattr(mx, "save_safetensors", save)


def test_converted_tensors_are_written_as_shards_fill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tiny_llama(tmp_path / "tiny.gguf")
    monkeypatch.setattr(convert, "SHARD_BYTES", SHARD)
    held = HeldBytes(monkeypatch)
    out = convert.import_gguf(source, tmp_path / "out", 16)
    header = read_header(source)
    width = 2  # bfloat16 on disk everywhere (widened only when loaded)
    largest_output = max(t.elements for t in header.tensors) * width
    total_output = sum(t.elements for t in header.tensors) * width
    assert total_output > 3 * SHARD  # several shards' worth, so holding it all would show
    assert held.peak <= SHARD + largest_output, (held.peak, total_output)
    assert held.peak <= convert.working_set(header, 16)
    index = json.loads((out / "model.safetensors.index.json").read_text())["weight_map"]
    files = sorted(p.name for p in out.glob("*.safetensors"))
    assert len(files) == held.saves > 2, "the import saved in several files, one per save"
    assert sorted(set(index.values())) == files, "the index names every file it wrote"
    assert files[0] == f"model-00001-of-{len(files):05d}.safetensors"
    assert len(index) == len(header.tensors)


def test_sharded_output_loads_like_a_single_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same model written as many shards and as one loads to the same weights and logits."""
    import mlx.core as mx
    from mlx_lm import load

    source = tiny_llama(tmp_path / "tiny.gguf")
    whole = convert.import_gguf(source, tmp_path / "whole", 16)
    monkeypatch.setattr(convert, "SHARD_BYTES", SHARD)
    sharded = convert.import_gguf(source, tmp_path / "sharded", 16)
    assert len(list(sharded.glob("*.safetensors"))) > len(list(whole.glob("*.safetensors"))) == 1
    (a, _), (b, _) = load(str(whole)), load(str(sharded))  # type: ignore[misc]
    tokens = mx.array([[1, 5, 9, 3]])
    assert mx.array_equal(a(tokens), b(tokens)).item()


def fake_7b_k_quant() -> GGUFHeader:
    """The tensor list of a 7B llama in Q4_K (no data): what the estimate is computed from."""
    dim, ffn, vocab, layers = 4096, 11008, 32000, 32
    q4k = 12  # 144 bytes per 256 values

    def info(name: str, *shape: int) -> TensorInfo:
        n = int(np.prod(shape))
        return TensorInfo(name, tuple(reversed(shape)), q4k, 0, n // 256 * 144)

    tensors = [info("token_embd.weight", vocab, dim), info("output.weight", vocab, dim)]
    for i in range(layers):
        tensors += [info(f"blk.{i}.attn_{p}.weight", dim, dim) for p in ("q", "k", "v", "output")]
        tensors += [info(f"blk.{i}.ffn_{p}.weight", ffn, dim) for p in ("gate", "up")]
        tensors += [info(f"blk.{i}.ffn_down.weight", dim, ffn)]
    return GGUFHeader(Path("7b.gguf"), 3, 0, {}, tuple(tensors), 0)


def test_estimate_for_a_7b_covers_what_the_shard_writer_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replays the importer's order over a 7B's tensors with stand-in arrays (sizes only): the most
    held at once (the shard not yet written plus the tensor being converted) is within the
    estimate, which stays far below the whole 16-bit model."""
    import mlx.core as mx

    from app.engine.gguf.shards import ShardWriter

    class Sized:
        def __init__(self, nbytes: int) -> None:
            self.nbytes = nbytes

    monkeypatch.setattr(mx, "save_safetensors", lambda *a, **k: None)
    header = fake_7b_k_quant()
    writer = ShardWriter(Path("unused"), convert.SHARD_BYTES)
    peak = 0
    for t in header.tensors:
        peak = max(peak, writer.pending_bytes + convert.tensor_working_set(t))
        writer.add({t.name: Sized(t.elements * 2)})
    estimate = convert.working_set(header, 16)
    whole_model = sum(t.elements for t in header.tensors) * 2
    assert peak <= estimate < whole_model / 2


def test_refusal_names_the_numbers_and_the_machine(tmp_path: Path) -> None:
    source = tiny_llama(tmp_path / "tiny.gguf")
    with pytest.raises(convert.ImportRefused) as refused:
        convert.import_gguf(source, tmp_path / "out", 16, memory_limit=1 << 29)
    needed = convert.working_set(read_header(source), 16) / 2**30
    assert str(refused.value) == (
        f"Importing this model needs about {needed:.1f} GiB of memory at once;"
        f" {'this Mac' if sys.platform == 'darwin' else 'this computer'} has 0.5 GiB free"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.gguf"]


@pytest.mark.real_models
def test_real_import_stays_within_its_estimate(tmp_path: Path) -> None:
    """The child's measured peak resident memory is under the estimate the pre-check used."""
    from app.engine.gguf.child import ImportFinished, run_import

    source = need_gguf("smollm2")
    events = list(run_import(source, tmp_path / "out", 16))
    assert isinstance(events[-1], ImportFinished), events[-1]
    assert 0 < events[-1].peak_rss_bytes <= convert.working_set(read_header(source), 16)


@pytest.mark.real_models
def test_real_model_in_many_shards_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real model written as many small shards loads through mlx-lm and answers as before."""
    from tests.engine.gguf.test_import import _greedy

    monkeypatch.setattr(convert, "SHARD_BYTES", 16 << 20)
    out = convert.import_gguf(need_gguf("smollm2"), tmp_path / "smol", 4)
    assert len(list(out.glob("model-*.safetensors"))) > 3
    assert "Paris" in _greedy(out, "What is the capital of France? Answer in one word.", 8)
