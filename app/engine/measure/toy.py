"""A deterministic tiny main/draft model pair, so tests and benchmarks run without downloads.

The three folders are ordinary MLX model folders (`mlx_lm.load` opens them offline):

* `main`: qwen2 with untied lm_head; shape `tiny` (default): hidden 256, 6 layers, 4 heads
  (2 KV heads), MLP 768; shape `1.5b`: Qwen2.5-1.5B's layer sizes, to time real step costs.
* `draft`: the first layer(s) of `main` with main's embedding, final norm and lm_head, so it
  agrees with the main often — a useful draft.
* `draft_random`: the draft's shape with independent weights — a useless draft.

All three share one real byte-level BPE tokenizer trained on the corpus below, so any UTF-8
text encodes. The same seed and dtype give the same bytes on every run.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

VOCAB_SIZE = 1024


@dataclass(frozen=True)
class ToyShape:
    """Layer sizes of the pair; the draft is the main's first `draft_layers` layers."""

    hidden: int
    main_layers: int
    draft_layers: int
    heads: int
    kv_heads: int
    intermediate: int


SHAPES = {
    # fast enough for unit tests on the CPU build
    "tiny": ToyShape(hidden=256, main_layers=6, draft_layers=1, heads=4, kv_heads=2, intermediate=768),
    # Qwen2.5-1.5B's layer sizes: step costs of a real model on a GPU, text of a random one
    # heads and KV heads that divide by 3, so the main can be split over 3 ranks in tests
    "tiny3": ToyShape(hidden=384, main_layers=4, draft_layers=1, heads=6, kv_heads=3, intermediate=768),
    "1.5b": ToyShape(hidden=1536, main_layers=28, draft_layers=4, heads=12, kv_heads=2, intermediate=8960),
}
STD = 0.02
# Larger than STD so the token identity survives the residual stream (the draft then agrees
# with the main) and logits are peaked enough that greedy decoding does not stall at once.
EMBED_STD = 1.0
HEAD_STD = 0.15

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
# English prose (with a little Japanese and emoji), Python code and JSON: enough for about 1000 BPE merges. Never edit it
# casually: any change changes every toy token id and so every recorded benchmark.
CORPUS = r'''
The quick brown fox jumps over the lazy dog. A small model can still be useful when it is fast.
Speculative decoding lets a small draft model propose several tokens, and the large model checks
them all in one forward pass. When the draft guesses well, the answer arrives sooner; when it
guesses badly, the large model simply corrects it, and the text is exactly what it would have been.
The morning was cold and bright. She walked down to the harbour, where the boats were already out,
and bought a cup of coffee from the stall by the water. The gulls were loud. Nobody was in a hurry.
It is a truth universally acknowledged that a program which works on the first try has not been
tested enough. Write the test first, then the code, then read the code again the next morning.
Questions and answers: What is the capital of France? The capital of France is Paris. How many
days are in a week? There are seven days in a week. What is two plus two? Two plus two is four.
Please summarise the following paragraph in one sentence. Thank you for your help! You are welcome.
The library opens at nine in the morning and closes at six in the evening, except on Sundays.
In the beginning there was the word, and the word was tokenised into several smaller pieces.
Rivers run to the sea, yet the sea is never full; the wind goes round and returns again.
A few lines of other scripts, so some merges end in the middle of a character:
今日はいい天気ですね。日本語のテキストも少しだけ入れておきます。ありがとうございます。
Café, naïve, façade, jalapeño, Zürich, smörgåsbord. Emoji: 👍 🎉 👩‍💻 ❤️ 🙂

def fibonacci(n: int) -> list[int]:
    """Return the first n Fibonacci numbers."""
    numbers = [0, 1]
    while len(numbers) < n:
        numbers.append(numbers[-1] + numbers[-2])
    return numbers[:n]


class Counter:
    def __init__(self, start: int = 0) -> None:
        self.value = start

    def increment(self, step: int = 1) -> int:
        self.value += step
        return self.value


def read_config(path: str) -> dict:
    import json

    with open(path, "r", encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise ValueError(f"expected an object in {path}, got {type(data).__name__}")
    return data


for index, item in enumerate(["alpha", "beta", "gamma"]):
    print(f"{index}: {item}")

if __name__ == "__main__":
    result = fibonacci(10)
    print("result =", result)
    counter = Counter()
    for _ in range(3):
        counter.increment()
    assert counter.value == 3, "counter should be three"

{"name": "SpecChat", "version": "1.0.0", "models": [{"id": "main", "layers": 6}, {"id": "draft", "layers": 1}]}
{"role": "user", "content": "Hello, how are you?"}
{"role": "assistant", "content": "I am fine, thank you. How can I help you today?"}
{"temperature": 0.7, "top_p": 0.9, "max_tokens": 256, "stream": true, "stop": ["\n\n"]}
{"id": 42, "tags": ["fast", "small", "local"], "enabled": false, "ratio": 0.5, "owner": null}
[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100, 1000, 2024, 3.14159, -1, 0.001]
{
  "type": "object",
  "properties": {
    "city": {"type": "string", "description": "The name of the city"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
  },
  "required": ["city"]
}
'''

QWEN2_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
MARKER = "toy_models.json"  # marks a folder this module wrote, so it may be replaced
DTYPES = ("float32", "float16", "bfloat16")

CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)


@dataclass(frozen=True)
class ToyModels:
    """Where the three model folders were written."""

    main: Path
    draft: Path
    draft_random: Path


def write_toy_models(out_dir: Path, seed: int = 0, dtype: str = "float32", shape: str = "tiny") -> ToyModels:
    """Write main/, draft/ and draft_random/ under `out_dir` and return their paths.

    The folder is built next to `out_dir` and renamed into place, so a crash leaves no
    half-written model behind. An existing `out_dir` is replaced only when it is empty or was
    written by this function; anything else raises FileExistsError.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, not {shape!r}")
    out_dir = Path(out_dir).absolute()
    check_replaceable(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        _write_all(tmp, seed, dtype, SHAPES[shape])
        swap_into_place(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ToyModels(out_dir / "main", out_dir / "draft", out_dir / "draft_random")


def check_replaceable(out_dir: Path) -> None:
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} exists and is not a folder; not overwriting it")
    if any(out_dir.iterdir()) and not (out_dir / MARKER).is_file():
        raise FileExistsError(
            f"{out_dir} is not empty and was not written by toy-models; choose an empty or new folder"
        )


def swap_into_place(tmp: Path, out_dir: Path) -> None:
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old.", dir=out_dir.parent))
        old.rmdir()
        out_dir.rename(old)
        tmp.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(out_dir)


def _write_all(root: Path, seed: int, dtype: str, shape: ToyShape) -> None:
    tokenizer_json = train_tokenizer()
    vocab = padded_vocab(tokenizer_json)
    eos_id = token_id(tokenizer_json, EOS_TOKEN)

    main = _random_weights(np.random.RandomState(seed), vocab, shape.main_layers, shape)
    draft = {k: v for k, v in main.items() if (_layer_index(k) or 0) < shape.draft_layers}
    draft_random = _random_weights(np.random.RandomState([seed, 1]), vocab, shape.draft_layers, shape)

    for name, weights, layers in (
        ("main", main, shape.main_layers),
        ("draft", draft, shape.draft_layers),
        ("draft_random", draft_random, shape.draft_layers),
    ):
        folder = root / name
        folder.mkdir()
        write_json(folder / "config.json", _config(vocab, layers, eos_id, dtype, shape))
        write_tokenizer_files(folder, tokenizer_json)
        save_weights(folder / "model.safetensors", weights, dtype)
    write_json(root / MARKER, {"seed": seed, "dtype": dtype, "models": ["main", "draft", "draft_random"]})


def padded_vocab(tokenizer_json: str) -> int:
    """The embedding rows for the tokenizer: at least VOCAB_SIZE, a multiple of 64."""
    return max(VOCAB_SIZE, _round_up(len(json.loads(tokenizer_json)["model"]["vocab"]), 64))


def train_tokenizer() -> str:
    """Train the byte-level BPE tokenizer on the built-in corpus; returns tokenizer.json text."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    # The same pipeline transformers' Qwen2Tokenizer rebuilds for model_type qwen2 (it ignores
    # the pre-tokenizer in tokenizer.json), so `tokenizers` and `mlx_lm.load` encode alike.
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS.splitlines(keepends=True), trainer=trainer)
    # Round-trip through JSON with sorted keys so the file bytes never depend on map order.
    return json.dumps(json.loads(tokenizer.to_str()), ensure_ascii=False, indent=1, sort_keys=True)


def write_tokenizer_files(folder: Path, tokenizer_json: str) -> None:
    """The tokenizer's three files, as mlx-lm and transformers read them from a model folder."""
    (folder / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    write_json(folder / "tokenizer_config.json", _tokenizer_config(tokenizer_json))
    write_json(folder / "special_tokens_map.json", _special_tokens_map())


def token_id(tokenizer_json: str, token: str) -> int:
    for added in json.loads(tokenizer_json)["added_tokens"]:
        if added["content"] == token:
            return int(added["id"])
    raise KeyError(token)


def _tokenizer_config(tokenizer_json: str) -> dict[str, Any]:
    added = {
        str(t["id"]): {
            "content": t["content"],
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for t in json.loads(tokenizer_json)["added_tokens"]
    }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "bos_token": None,
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "unk_token": None,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 32768,
        "chat_template": CHATML_TEMPLATE,
    }


def _special_tokens_map() -> dict[str, Any]:
    return {"eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN, "additional_special_tokens": ["<|im_start|>"]}


def _config(vocab: int, layers: int, eos_id: int, dtype: str, shape: ToyShape) -> dict[str, Any]:
    return qwen2_config(
        hidden=shape.hidden,
        layers=layers,
        heads=shape.heads,
        kv_heads=shape.kv_heads,
        intermediate=shape.intermediate,
        vocab=vocab,
        eos_id=eos_id,
        dtype=dtype,
        rope_theta=10000.0,
    )


def qwen2_config(
    *,
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    intermediate: int,
    vocab: int,
    eos_id: int,
    dtype: str,
    rope_theta: float,
) -> dict[str, Any]:
    """The config.json of a qwen2 model with an untied lm_head: what mlx-lm builds it from."""
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "intermediate_size": intermediate,
        "vocab_size": vocab,
        "rms_norm_eps": 1e-6,
        "rope_theta": rope_theta,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "eos_token_id": eos_id,
        "torch_dtype": dtype,
    }


def _random_weights(
    rng: np.random.RandomState, vocab: int, layers: int, shape: ToyShape
) -> dict[str, np.ndarray]:
    """Draw every tensor in a fixed order, so a seed always gives the same weights."""
    HIDDEN, INTERMEDIATE = shape.hidden, shape.intermediate
    kv = shape.kv_heads * (HIDDEN // shape.heads)

    def normal(*shape: int, std: float = STD) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    weights = {"model.embed_tokens.weight": normal(vocab, HIDDEN, std=EMBED_STD)}
    for i in range(layers):
        p = f"model.layers.{i}."
        weights[p + "input_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        weights[p + "post_attention_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        weights[p + "self_attn.q_proj.weight"] = normal(HIDDEN, HIDDEN)
        weights[p + "self_attn.q_proj.bias"] = normal(HIDDEN)
        weights[p + "self_attn.k_proj.weight"] = normal(kv, HIDDEN)
        weights[p + "self_attn.k_proj.bias"] = normal(kv)
        weights[p + "self_attn.v_proj.weight"] = normal(kv, HIDDEN)
        weights[p + "self_attn.v_proj.bias"] = normal(kv)
        weights[p + "self_attn.o_proj.weight"] = normal(HIDDEN, HIDDEN)
        weights[p + "mlp.gate_proj.weight"] = normal(INTERMEDIATE, HIDDEN)
        weights[p + "mlp.up_proj.weight"] = normal(INTERMEDIATE, HIDDEN)
        weights[p + "mlp.down_proj.weight"] = normal(HIDDEN, INTERMEDIATE)
    weights["model.norm.weight"] = np.ones(HIDDEN, np.float32)
    weights["lm_head.weight"] = normal(vocab, HIDDEN, std=HEAD_STD)
    return weights


def _layer_index(key: str) -> int | None:
    parts = key.split(".")
    if len(parts) > 2 and parts[1] == "layers":
        return int(parts[2])
    return None


def save_weights(path: Path, weights: dict[str, np.ndarray], dtype: str) -> None:
    import mlx.core as mx

    arrays = {k: mx.array(weights[k]).astype(getattr(mx, dtype)) for k in sorted(weights)}
    mx.save_safetensors(str(path), arrays, metadata={"format": "mlx"})


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple
