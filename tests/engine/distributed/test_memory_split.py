"""Each machine's share of a split main model against its free memory."""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from pathlib import Path

from app.engine.distributed.memory_split import ModelShape, Verdict, kv_share, model_shape, split_fit
from app.engine.library.facts import compute_facts
from app.engine.library.memory import OVERHEAD

GIB = 2**30


def _main():  # a stand-in main: only its size and cache per token matter here
    from app.engine.library.facts import ModelFacts

    return ModelFacts(
        path="/m",
        name="m",
        source="user",
        fingerprint="f",
        architecture="llama",
        params=None,
        bits=4,
        size_bytes=9 * GIB,
        context_length=None,
        vocab_size=None,
        vocab_fingerprint=None,
        vision=False,
        trim="full",
        sliding_window=None,
        kv_bytes_per_token=1024,
    )


MAIN = _main()


def write_model(folder: Path, tensors: dict[str, int], config: dict[str, object]) -> Path:
    """A config and a safetensors file whose header gives each tensor `bytes` (data left zero)."""
    folder.mkdir(parents=True)
    header, offset = {}, 0
    for name, size in tensors.items():
        header[name] = {"dtype": "U8", "shape": [size], "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_layers_split_while_embeddings_head_and_norms_stay_whole(tmp_path):
    folder = write_model(
        tmp_path / "m",
        {
            "model.embed_tokens.weight": 1000,
            "model.layers.0.self_attn.q_proj.weight": 400,
            "model.layers.0.self_attn.q_norm.weight": 3,
            "model.layers.0.input_layernorm.weight": 5,
            "model.layers.1.mlp.down_proj.weight": 600,
            "model.layers.1.mlp.down_proj.scales": 40,
            "model.norm.weight": 7,
            "lm_head.weight": 900,
        },
        {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4},
    )
    shape = model_shape(folder, compute_facts(folder))
    assert shape == ModelShape(weights=2955, whole=1000 + 3 + 5 + 7 + 900, kv_heads=4)


def test_kv_heads_come_from_the_text_config_of_a_vision_model(tmp_path):
    folder = write_model(
        tmp_path / "v",
        {"language_model.model.layers.0.mlp.up_proj.weight": 10},
        {"model_type": "qwen2_vl", "text_config": {"num_attention_heads": 16, "num_key_value_heads": 2}},
    )
    assert model_shape(folder, compute_facts(folder)).kv_heads == 2


def test_kv_cache_splits_only_when_heads_divide_evenly():
    assert kv_share(800, 8, 2) == 400
    assert kv_share(800, 8, 4) == 200
    assert kv_share(800, 8, 3) == 800  # every machine keeps all heads
    assert kv_share(800, None, 2) == 800


def test_each_machine_gets_its_share_and_the_draft_stays_on_this_mac(toy_models):
    main, draft = compute_facts(toy_models.main), compute_facts(toy_models.draft)
    main = replace(main, size_bytes=40 * GIB, kv_bytes_per_token=320 * 1024)
    shape = ModelShape(weights=40 * GIB, whole=2 * GIB, kv_heads=8)
    shares = split_fit(main, shape, [("this-mac", 64 * GIB), ("studio", 32 * GIB)], 8192, draft)
    assert [s.host for s in shares] == ["this-mac", "studio"]
    assert all(s.weights == 2 * GIB + 19 * GIB for s in shares)
    assert all(s.kv == 320 * 1024 * 8192 // 2 for s in shares)
    assert shares[0].draft == draft.size_bytes + draft.kv_bytes_per_token * 8192, "rank 0 holds the draft"
    assert shares[1].draft == 0, "the other rank holds no draft"
    assert shares[0].need == 21 * GIB + shares[0].kv + shares[0].draft + OVERHEAD
    assert [s.verdict for s in shares] == [Verdict.FITS, Verdict.FITS]
    assert "of 32.0 GB free" in shares[1].explain(), "the explanation gives the free memory"
    assert "draft" not in shares[1].explain(), "a rank without the draft says nothing about one"


def test_fits_tight_does_not_fit_and_unknown():
    shape = ModelShape(weights=9 * GIB, whole=GIB, kv_heads=None)

    def verdicts(free: list[int | None]) -> list[Verdict]:
        hosts = [(f"m{i}", f) for i, f in enumerate(free)]
        return [s.verdict for s in split_fit(MAIN, shape, hosts, 1024)]

    # two machines: 1 + 4 GiB of weights, a 1 MiB cache, the margin
    need = 5 * GIB + 1024 * 1024 + OVERHEAD
    assert verdicts([need, need - 1]) == [Verdict.TIGHT, Verdict.NO]
    assert verdicts([int(need / 0.85) + 1, None]) == [Verdict.FITS, Verdict.UNKNOWN]
    # three machines share the layers unevenly: each holds the larger part
    assert split_fit(MAIN, shape, [("a", None)] * 3, 1024)[0].weights == GIB + -(-8 * GIB // 3)


def test_one_machine_holds_everything():
    [share] = split_fit(MAIN, ModelShape(7 * GIB, GIB, 4), [("here", None)], 2048)
    assert (share.weights, share.kv) == (7 * GIB, 2048 * 1024)
    assert "not known" in share.explain()
