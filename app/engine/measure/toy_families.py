"""Tiny models of the other families SpecChat loads, sharing the toy pair's tokenizer, so every
cache path can be checked against plain decoding on each attention kind in seconds.

* `write_llama_main`: the toy main as a llama (its weights without the qwen2 biases).
* `write_gemma3_pair`: a sliding-window main (Gemma 3's text architecture) and a draft made of
  its first layers, which agrees with it often.

Gemma 3 mixes layers that attend to the whole conversation with layers that attend to the last
`sliding_window` tokens only, and mlx-lm gives the windowed layers a rotating cache. A window of
32 tokens lets a test run answers well past it in seconds, so every cache path (trims after
refused drafts, rewinds across turns, Stop) meets the window, where a 512-token window would
need minutes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from app.engine.measure.toy import (
    EOS_TOKEN,
    padded_vocab,
    save_weights,
    token_id,
    train_tokenizer,
    write_json,
    write_tokenizer_files,
)

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE = 256, 4, 2, 64, 768
STD = 0.02
# as in toy.py: the token's identity survives the residual stream and the logits are peaked, so
# greedy answers neither stall at once nor sit on near-ties
EMBED_STD = 1.0 / 16  # Gemma multiplies embeddings by sqrt(hidden) = 16
HEAD_STD = 0.15
POST_NORM_SCALE = 0.1


def windowed_config(layers: int, window: int, pattern: int, vocab: int, eos_id: int) -> dict[str, Any]:
    """config.json of a gemma3_text model: every `pattern`-th layer global, the others windowed."""
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "hidden_size": HIDDEN,
        "num_hidden_layers": layers,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "intermediate_size": INTERMEDIATE,
        "vocab_size": vocab,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1_000_000.0,
        "rope_local_base_freq": 10_000.0,
        "query_pre_attn_scalar": HEAD_DIM,
        "sliding_window": window,
        "sliding_window_pattern": pattern,
        "max_position_embeddings": 32768,
        "eos_token_id": eos_id,
        "torch_dtype": "float32",
    }


def write_gemma3_pair(
    root: Path, *, seed: int = 0, layers: int = 6, window: int = 32, pattern: int = 3
) -> tuple[Path, Path]:
    """Write main/ and draft/ under `root`; the draft is the main's first `pattern` layers, the
    fewest that mlx-lm builds a gemma3 model of (windowed layers and one global)."""
    tokenizer_json = train_tokenizer()
    vocab = padded_vocab(tokenizer_json)
    rng = np.random.RandomState([seed, 3])

    def normal(*shape: int, std: float = STD) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    weights = {"model.embed_tokens.weight": normal(vocab, HIDDEN, std=EMBED_STD)}
    for i in range(layers):
        p = f"model.layers.{i}."
        for norm in ("input", "pre_feedforward"):
            weights[f"{p}{norm}_layernorm.weight"] = np.zeros(HIDDEN, np.float32)  # scale 1 + w
        # Gemma normalises what each layer adds; scaled down, the token's identity survives
        for norm in ("post_attention", "post_feedforward"):
            weights[f"{p}{norm}_layernorm.weight"] = np.full(HIDDEN, POST_NORM_SCALE - 1, np.float32)
        weights[p + "self_attn.q_proj.weight"] = normal(HEADS * HEAD_DIM, HIDDEN)
        weights[p + "self_attn.k_proj.weight"] = normal(KV_HEADS * HEAD_DIM, HIDDEN)
        weights[p + "self_attn.v_proj.weight"] = normal(KV_HEADS * HEAD_DIM, HIDDEN)
        weights[p + "self_attn.o_proj.weight"] = normal(HIDDEN, HEADS * HEAD_DIM)
        weights[p + "self_attn.q_norm.weight"] = np.zeros(HEAD_DIM, np.float32)
        weights[p + "self_attn.k_norm.weight"] = np.zeros(HEAD_DIM, np.float32)
        weights[p + "mlp.gate_proj.weight"] = normal(INTERMEDIATE, HIDDEN)
        weights[p + "mlp.up_proj.weight"] = normal(INTERMEDIATE, HIDDEN)
        weights[p + "mlp.down_proj.weight"] = normal(HIDDEN, INTERMEDIATE)
    weights["model.norm.weight"] = np.zeros(HIDDEN, np.float32)
    weights["lm_head.weight"] = normal(vocab, HIDDEN, std=HEAD_STD)

    eos_id = token_id(tokenizer_json, EOS_TOKEN)
    draft = {
        k: v
        for k, v in weights.items()
        if not k.startswith("model.layers.") or int(k.split(".")[2]) < pattern
    }
    for name, tensors, count in (("main", weights, layers), ("draft", draft, pattern)):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / "config.json", windowed_config(count, window, pattern, vocab, eos_id))
        write_tokenizer_files(folder, tokenizer_json)
        save_weights(folder / "model.safetensors", tensors, "float32")
    return root / "main", root / "draft"


def write_llama_main(toy_main: Path, folder: Path) -> Path:
    """The toy main (`toy.py`) as a llama model: the same weights less the attention biases
    qwen2 has and llama has not, so the two differ in text but share the vocabulary."""
    import mlx.core as mx

    loaded = mx.load(str(toy_main / "model.safetensors"))
    assert isinstance(loaded, dict), "a safetensors file loads as a dict of arrays"
    weights = {k: v for k, v in loaded.items() if not k.endswith(".bias")}
    config = json.loads((toy_main / "config.json").read_text(encoding="utf-8"))
    config.update(
        architectures=["LlamaForCausalLM"], model_type="llama", attention_bias=False, mlp_bias=False
    )
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", config)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).write_bytes((toy_main / name).read_bytes())
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    return folder
