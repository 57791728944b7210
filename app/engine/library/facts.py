"""Facts about a model folder, from its metadata files only, cached by a fingerprint of its files.

Weights are never loaded: the parameter count comes from the safetensors headers, which are also
checked, so a damaged folder is marked unusable with the reason before anything offers it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.decoding.safetensors_file import safetensors_problem
from app.engine.library.safety import read_json, remote_code_requests, weight_problem
from app.engine.library.store import Store
from app.engine.library.vocab import VocabError, Vocabulary, read_vocabulary

# mlx-lm model types whose cache holds recurrent state (ArraysCache/MambaCache): never trimmable.
RECURRENT_TYPES = frozenset(
    {
        "baichuan_m1",
        "bailing_hybrid",
        "bailing_moe_linear",
        "falcon_h1",
        "granitemoehybrid",
        "jamba",
        "kimi_linear",
        "lfm2",
        "lfm2_moe",
        "mamba",
        "mamba2",
        "nemotron_h",
        "olmo_hybrid",
        "plamo2",
        "qwen3_5",
        "qwen3_next",
        "recurrent_gemma",
        "rwkv7",
    }
)
# Types whose sliding-window layers use a rotating cache: trimmable only inside the window.
ROTATING_TYPES = frozenset(
    {
        "gemma2",
        "gemma3",
        "gemma3_text",
        "gemma3n",
        "gemma4",
        "gemma4_text",
        "cohere2",
        "exaone4",
        "gpt_oss",
        "mimo_v2_flash",
        "afmoe",
        "step3p5",
    }
)
VISION_TYPES = frozenset(
    {
        "llava",
        "llava_next",
        "mllama",
        "pixtral",
        "qwen2_vl",
        "qwen2_5_vl",
        "qwen3_vl",
        "qwen3_vl_moe",
        "kimi_vl",
        "lfm2-vl",
        "idefics3",
        "paligemma",
        "smolvlm",
        "mistral3",
    }
)
MAX_HEADER = 100 * 2**20
# The cache's kind for facts; its number changes whenever what facts hold does, so facts cached
# by an older version are read again instead of lacking a field (or a problem) newer code checks.
CACHE_KIND = "facts-2"
# Samples of each weights file that tell two copies of one model from two models of one shape.
SAMPLES, SAMPLE_BYTES = 8, 64 * 1024
NOT_READABLE = "is not a model file SpecChat can read"


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What the library shows about one model folder; `problems` make it unusable."""

    path: str
    name: str
    source: str
    fingerprint: str
    architecture: str
    params: int | None
    bits: int | None
    size_bytes: int
    context_length: int | None
    vocab_size: int | None
    vocab_fingerprint: str | None
    vision: bool
    trim: str  # "full", "window" (rotating cache: only inside the sliding window) or "none"
    sliding_window: int | None
    kv_bytes_per_token: int
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    weights_digest: str | None = None  # the same for two copies of one model (see weights_digest)

    @property
    def usable(self) -> bool:
        return not self.problems

    @property
    def trimmable(self) -> bool:
        return self.trim != "none"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelFacts:
        data = dict(data)
        data["problems"], data["warnings"] = tuple(data["problems"]), tuple(data["warnings"])
        return cls(**data)


def folder_fingerprint(folder: Path) -> str:
    """Names, sizes and modification times of the folder's files: changes when any file does."""
    digest = hashlib.sha256(str(folder.resolve()).encode())
    try:
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError:
        return "missing"
    for p in entries:
        try:
            st = p.stat()
        except OSError:
            continue
        digest.update(f"{p.name}\x00{st.st_size}\x00{st.st_mtime_ns}\x01".encode())
    return digest.hexdigest()[:24]


def weights_digest(folder: Path) -> str | None:
    """Which weights the folder holds, from each safetensors file's size and a few samples of its
    bytes (the header among them): two copies of one model match wherever they are, two fine-tunes
    of one shape differ in every tensor. None when it has no weights to read."""
    digest, files = hashlib.sha256(), sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    for path in files:
        try:
            size = path.stat().st_size
            digest.update(size.to_bytes(8, "little"))
            with path.open("rb") as f:
                for i in range(SAMPLES):
                    f.seek(size * i // SAMPLES)
                    digest.update(f.read(SAMPLE_BYTES))
        except OSError:
            return None
    return digest.hexdigest()[:24]


def damage(folder: Path) -> list[str]:
    """A problem for each weights file whose header does not hold: plain words, then the detail."""
    out = []
    for path in sorted(folder.glob("*.safetensors")):
        if (problem := safetensors_problem(path)) is not None:
            out.append(f"damaged: {path.name} {NOT_READABLE} ({problem})")
    return out


def safetensors_header(path: Path) -> dict[str, Any]:
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            return {}
        (length,) = struct.unpack("<Q", raw)
        if length > MAX_HEADER:
            return {}
        try:
            header = json.loads(f.read(length))
        except ValueError:
            return {}
    return header if isinstance(header, dict) else {}


def count_params(
    folder: Path, bits: int | None, quantized: bool, overrides: dict[str, Any] | None = None
) -> int | None:
    """Parameters from safetensors shapes; packed quantized words count 32/bits each.

    `overrides` is the config's per-module quantization (mixed-precision imports keep some
    matrices at 8 bits), keyed by module path.
    """
    overrides = overrides or {}
    total, seen = 0, False
    for shard in sorted(folder.glob("*.safetensors")):
        for name, info in safetensors_header(shard).items():
            if name == "__metadata__" or not isinstance(info, dict):
                continue
            shape = info.get("shape") or []
            numel = math.prod(int(d) for d in shape) if shape else 1
            if quantized and name.endswith((".scales", ".biases")):
                continue
            if quantized and bits and info.get("dtype") == "U32":
                module = overrides.get(name.rsplit(".", 1)[0])
                module_bits = _int(module.get("bits")) if isinstance(module, dict) else None
                numel = numel * 32 // (module_bits or bits)
            total += numel
            seen = True
    return total if seen else None


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    inner = config.get("text_config")
    return {**config, **inner} if isinstance(inner, dict) else config


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _bits(config: dict[str, Any]) -> int | None:
    quant = config.get("quantization") or config.get("quantization_config")
    if isinstance(quant, dict) and _int(quant.get("bits")):
        return int(quant["bits"])
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "")
    return {"bfloat16": 16, "float16": 16, "float32": 32}.get(dtype)


def _trim(model_type: str, config: dict[str, Any]) -> tuple[str, int | None]:
    window = _int(config.get("sliding_window"))
    if model_type in RECURRENT_TYPES:
        return "none", None
    layer_types = config.get("layer_types")
    if model_type in ROTATING_TYPES or (isinstance(layer_types, list) and "sliding_attention" in layer_types):
        return ("window", window) if window else ("full", None)
    return "full", None


def _kv_bytes_per_token(config: dict[str, Any]) -> int:
    layers = _int(config.get("num_hidden_layers")) or 0
    heads = _int(config.get("num_attention_heads")) or 1
    kv_heads = _int(config.get("num_key_value_heads")) or heads
    head_dim = _int(config.get("head_dim")) or (_int(config.get("hidden_size")) or 0) // heads
    return 2 * layers * kv_heads * head_dim * 2  # keys and values, 2 bytes each (fp16/bf16)


def compute_facts(
    folder: Path, source: str = "user", vocabularies: dict[Path, Vocabulary] | None = None
) -> ModelFacts:
    folder = Path(folder)
    problems: list[str] = []
    warnings: list[str] = []
    raw = read_json(folder / "config.json")
    if not raw:
        problems.append("no readable config.json")
    config = _text_config(raw)
    model_type = str(raw.get("model_type") or config.get("model_type") or "unknown")
    if (bad := weight_problem(folder)) is not None:
        problems.append(bad)
    problems += damage(folder)
    warnings += [f"asks for remote code ({r}); it is ignored" for r in remote_code_requests(folder)]
    vision = (
        "vision_config" in raw
        or model_type in VISION_TYPES
        or (folder / "preprocessor_config.json").exists()
        or any(k in raw for k in ("image_token_index", "image_token_id"))
    )
    try:
        vocab_fp: str | None = read_vocabulary(folder, vocabularies).fingerprint()
    except VocabError as exc:
        vocab_fp = None
        problems.append(str(exc))
    trim, window = _trim(model_type, config)
    if trim == "none":
        warnings.append("its cache cannot be rewound (recurrent layers): no speculation with it as a draft")
    bits = _bits(raw)
    quantized = isinstance(raw.get("quantization"), dict)
    context = _int(config.get("max_position_embeddings"))
    if context is None:
        context = _int(read_json(folder / "tokenizer_config.json").get("model_max_length"))
        context = context if context and context < 10_000_000 else None
    files = [p for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
    return ModelFacts(
        path=str(folder),
        name=folder.name,
        source=source,
        fingerprint=folder_fingerprint(folder),
        architecture=model_type,
        params=count_params(folder, bits, quantized, raw.get("quantization") if quantized else None),
        bits=bits,
        size_bytes=sum(p.stat().st_size for p in files),
        context_length=context,
        vocab_size=_int(config.get("vocab_size")),
        vocab_fingerprint=vocab_fp,
        vision=bool(vision),
        trim=trim,
        sliding_window=window,
        kv_bytes_per_token=_kv_bytes_per_token(config),
        problems=tuple(problems),
        warnings=tuple(warnings),
        weights_digest=weights_digest(folder),
    )


def model_facts(
    folder: Path,
    source: str = "user",
    store: Store | None = None,
    vocabularies: dict[Path, Vocabulary] | None = None,
) -> ModelFacts:
    """Facts for one folder, from the cache when its files have not changed."""
    return facts_for([Path(folder)], source, store, vocabularies)[0]


def facts_for(
    folders: list[Path],
    source: str = "user",
    store: Store | None = None,
    vocabularies: dict[Path, Vocabulary] | None = None,
) -> list[ModelFacts]:
    """Facts for many folders with one cache query; only changed folders are re-read (their
    vocabularies into `vocabularies`, when given, for a compatibility check that follows)."""
    store = store or Store()
    keys = [folder_fingerprint(f) for f in folders]
    cached = store.get_many(CACHE_KIND, keys)
    out = []
    for folder, key in zip(folders, keys):
        if key in cached:
            facts = ModelFacts.from_json(cached[key])
            out.append(dataclasses.replace(facts, source=source) if facts.source != source else facts)
            continue
        facts = compute_facts(folder, source, vocabularies)
        store.put(CACHE_KIND, key, facts.to_json())
        out.append(facts)
    return out
