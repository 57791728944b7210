"""The table of GGUF architectures the importer knows: config keys, tensor names, fix-ups.

Adding an architecture means one `Architecture` entry: how its GGUF metadata becomes an mlx-lm
`config.json`, how its tensor names map, and any transform llama.cpp's converter applied that
has to be undone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.engine.gguf.header import GGUFError, GGUFHeader

# GGUF tensor names -> Hugging Face / mlx-lm names; per-layer names live under blk.N.
GLOBAL_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}

Transform = Callable[[str, np.ndarray, dict[str, Any]], np.ndarray]


def _unpermute_llama(name: str, w: np.ndarray, config: dict[str, Any]) -> np.ndarray:
    """Undo llama.cpp's rotary row order for Q and K (it interleaves each head's halves)."""
    if name.endswith("self_attn.q_proj.weight"):
        heads = config["num_attention_heads"]
    elif name.endswith("self_attn.k_proj.weight"):
        heads = config["num_key_value_heads"]
    else:
        return w
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _gemma_norms(name: str, w: np.ndarray, config: dict[str, Any]) -> np.ndarray:
    """llama.cpp stores Gemma's RMSNorm weights as 1 + w; mlx-lm adds the 1 itself."""
    return w - 1.0 if name.endswith("norm.weight") else w


@dataclass(frozen=True, slots=True)
class Architecture:
    gguf_name: str
    model_type: str
    extra_config: Callable[[GGUFHeader, dict[str, Any]], dict[str, Any]]
    layer_names: dict[str, str] = field(default_factory=lambda: dict(LAYER_NAMES))
    transform: Transform | None = None

    def hf_name(self, gguf_name: str) -> str | None:
        """The mlx-lm name of a GGUF tensor, or None when this architecture has no such tensor."""
        stem, dot, suffix = gguf_name.rpartition(".")
        if not dot or suffix not in ("weight", "bias"):
            return None
        if stem in GLOBAL_NAMES:
            return f"{GLOBAL_NAMES[stem]}.{suffix}"
        parts = stem.split(".")
        if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in self.layer_names:
            return f"model.layers.{int(parts[1])}.{self.layer_names[parts[2]]}.{suffix}"
        return None


def _need(header: GGUFHeader, key: str, kind: type | tuple[type, ...] = int) -> Any:
    value = header.get(key)
    if value is None:
        raise GGUFError(f"metadata key {key!r} is missing")
    if not isinstance(value, kind) or isinstance(value, bool):
        raise GGUFError(f"metadata key {key!r} is {value!r}, expected {kind}")
    if isinstance(value, int) and not 0 < value < 1 << 24:
        raise GGUFError(f"metadata key {key!r} = {value} is out of range")
    return value


def base_config(header: GGUFHeader, arch: Architecture) -> dict[str, Any]:
    """The config keys every supported architecture shares."""
    a = arch.gguf_name
    tokens = header.get("tokenizer.ggml.tokens") or []
    names = {t.name for t in header.tensors}
    heads = _need(header, f"{a}.attention.head_count")
    hidden = _need(header, f"{a}.embedding_length")
    config: dict[str, Any] = {
        "model_type": arch.model_type,
        "hidden_size": hidden,
        "num_hidden_layers": _need(header, f"{a}.block_count"),
        "intermediate_size": _need(header, f"{a}.feed_forward_length"),
        "num_attention_heads": heads,
        "num_key_value_heads": header.get(f"{a}.attention.head_count_kv", heads),
        "rms_norm_eps": float(_need(header, f"{a}.attention.layer_norm_rms_epsilon", float)),
        "rope_theta": float(header.get(f"{a}.rope.freq_base", 10000.0)),
        "max_position_embeddings": header.get(f"{a}.context_length", 4096),
        "vocab_size": header.get(f"{a}.vocab_size", len(tokens)),
        "tie_word_embeddings": "output.weight" not in names,
    }
    for key, gguf_key in (("bos_token_id", "bos_token_id"), ("eos_token_id", "eos_token_id")):
        if isinstance(header.get(f"tokenizer.ggml.{gguf_key}"), int):
            config[key] = header.get(f"tokenizer.ggml.{gguf_key}")
    if hidden % heads:
        raise GGUFError(f"embedding length {hidden} is not a multiple of {heads} heads")
    if heads % config["num_key_value_heads"]:
        raise GGUFError(f"{heads} heads are not a multiple of {config['num_key_value_heads']} KV heads")
    return config


def _llama(header: GGUFHeader, config: dict[str, Any]) -> dict[str, Any]:
    head_dim = header.get(
        "llama.rope.dimension_count", config["hidden_size"] // config["num_attention_heads"]
    )
    return {"head_dim": head_dim, "attention_bias": False, "mlp_bias": False, "rope_traditional": False}


def _qwen2(header: GGUFHeader, config: dict[str, Any]) -> dict[str, Any]:
    return {}


def _gemma3(header: GGUFHeader, config: dict[str, Any]) -> dict[str, Any]:
    head_dim = _need(header, "gemma3.attention.key_length")
    extra: dict[str, Any] = {
        "head_dim": head_dim,
        # llama.cpp scales queries by 1/sqrt(head_dim) for every size but 27B.
        "query_pre_attn_scalar": head_dim,
        "sliding_window": header.get("gemma3.attention.sliding_window", 512),
        "sliding_window_pattern": 6,  # fixed by the architecture, not stored in GGUF
        "rope_local_base_freq": 10000.0,
        "hidden_activation": "gelu_pytorch_tanh",
    }
    factor = header.get("gemma3.rope.scaling.factor")
    if isinstance(factor, (int, float)) and factor > 1:
        extra["rope_scaling"] = {"rope_type": "linear", "factor": float(factor)}
    return extra


ARCHITECTURES: dict[str, Architecture] = {
    a.gguf_name: a
    for a in (
        Architecture("llama", "llama", _llama, transform=_unpermute_llama),
        Architecture("qwen2", "qwen2", _qwen2),
        Architecture(
            "gemma3",
            "gemma3_text",
            _gemma3,
            layer_names=dict(
                LAYER_NAMES,
                ffn_norm="pre_feedforward_layernorm",
                post_attention_norm="post_attention_layernorm",
                post_ffw_norm="post_feedforward_layernorm",
            ),
            transform=_gemma_norms,
        ),
    )
}


def architecture_of(header: GGUFHeader) -> Architecture:
    name = header.get("general.architecture")
    if name not in ARCHITECTURES:
        raise GGUFError(
            f"architecture {name!r} is not supported (supported: {', '.join(sorted(ARCHITECTURES))})"
        )
    return ARCHITECTURES[name]


def model_config(header: GGUFHeader) -> dict[str, Any]:
    """The mlx-lm config.json for this file (quantization is added by the converter)."""
    arch = architecture_of(header)
    config = base_config(header, arch)
    config.update(arch.extra_config(header, config))
    config["architectures"] = [_HF_CLASSES.get(arch.model_type, "")]
    return config


_HF_CLASSES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
}
