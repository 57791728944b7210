"""A `tokenizers` tokenizer rebuilt from GGUF metadata, without PyTorch or transformers.

GGUF carries the vocabulary, merges (or SentencePiece scores), token types and a pre-tokenizer
name; the rest of a tokenizer's shape is implied by those names, and is spelled out here.
"""

from __future__ import annotations

from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from app.engine.gguf.header import GGUFError, GGUFHeader

CONTROL, USER_DEFINED = 3, 4

_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# tokenizer.ggml.pre -> the split regex its merges were learned with.
PRE_TOKENIZER_SPLITS: dict[str, str] = {
    "default": _GPT2_SPLIT,
    "gpt2": _GPT2_SPLIT,
    "smollm": _GPT2_SPLIT,
    "qwen2": _QWEN2_SPLIT,
    "deepseek-r1-qwen": _QWEN2_SPLIT,
    "llama3": _LLAMA3_SPLIT,
    "llama-bpe": _LLAMA3_SPLIT,
}


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table used by byte-level vocabularies."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def _tokens(header: GGUFHeader) -> list[str]:
    tokens = header.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise GGUFError("tokenizer.ggml.tokens is missing or not a list of strings")
    return tokens


def _token_types(header: GGUFHeader, n: int) -> list[int]:
    types = header.get("tokenizer.ggml.token_type")
    if types is None:
        return [1] * n
    if not isinstance(types, list) or len(types) != n:
        raise GGUFError(f"tokenizer.ggml.token_type does not have one entry per token ({n})")
    return types


def _byte_level(header: GGUFHeader, tokens: list[str]) -> Tokenizer:
    spelling = bytes_to_unicode()
    alphabet = set(spelling.values())
    vocab: dict[str, int] = {}
    for i, token in enumerate(tokens):
        spelled = token if set(token) <= alphabet else "".join(spelling[b] for b in token.encode("utf-8"))
        vocab.setdefault(spelled, i)
    merges_raw = header.get("tokenizer.ggml.merges")
    if not isinstance(merges_raw, list):
        raise GGUFError("a byte-level (gpt2) tokenizer needs tokenizer.ggml.merges")
    merges = []
    for m in merges_raw:
        left, sep, right = m.partition(" ")
        if not sep:
            raise GGUFError(f"malformed merge {m!r}")
        merges.append((left, right))
    tok = Tokenizer(models.BPE(vocab, merges, fuse_unk=False, byte_fallback=False, ignore_merges=False))
    pre = header.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZER_SPLITS:
        raise GGUFError(
            f"pre-tokenizer {pre!r} is not supported (known: {', '.join(sorted(PRE_TOKENIZER_SPLITS))})"
        )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRE_TOKENIZER_SPLITS[pre]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def sentencepiece_merges(tokens: list[str]) -> list[tuple[str, str]]:
    """Merges implied by a SentencePiece BPE vocabulary: every split of a token into two tokens,
    best (earliest) token first, longer left halves first."""
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for token in tokens:
        for cut in range(len(token) - 1, 0, -1):
            left, right = token[:cut], token[cut:]
            if left in vocab and right in vocab:
                merges.append((left, right))
    return merges


def _sentencepiece(header: GGUFHeader, tokens: list[str]) -> Tokenizer:
    # A token made only of spaces is stored with real spaces; the model sees them as U+2581.
    tokens = ["\u2581" * len(t) if t and not t.strip(" ") else t for t in tokens]
    vocab: dict[str, int] = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    unk_id = header.get("tokenizer.ggml.unknown_token_id")
    unk = tokens[unk_id] if isinstance(unk_id, int) and 0 <= unk_id < len(tokens) else None
    tok = Tokenizer(
        models.BPE(vocab, sentencepiece_merges(tokens), unk_token=unk, fuse_unk=True, byte_fallback=True)
    )
    steps: list[normalizers.Normalizer] = [normalizers.Replace(" ", "\u2581")]
    if header.get("tokenizer.ggml.add_space_prefix", False):
        steps.insert(0, normalizers.Prepend("\u2581"))
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    return tok


def build_tokenizer(header: GGUFHeader) -> Tokenizer:
    """The tokenizer the metadata describes, with control tokens as whole special tokens."""
    tokens = _tokens(header)
    types = _token_types(header, len(tokens))
    kind = header.get("tokenizer.ggml.model")
    if kind == "gpt2":
        tok = _byte_level(header, tokens)
        alphabet = set(bytes_to_unicode().values())
        control = [t for t, ty in zip(tokens, types) if ty == CONTROL and set(t) <= alphabet]
    elif kind == "llama":
        tok = _sentencepiece(header, tokens)
        control = [t for t, ty in zip(tokens, types) if ty == CONTROL]
    else:
        raise GGUFError(f"tokenizer model {kind!r} is not supported (supported: gpt2, llama)")
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in control])
    vocab = tok.get_vocab()
    user = [t for t, ty in zip(tokens, types) if ty == USER_DEFINED and t in vocab]
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in user])
    bos = special_tokens(header).get("bos_token")
    if header.get("tokenizer.ggml.add_bos_token", kind == "llama") and bos:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, vocab[bos])]
        )
    return tok


def special_tokens(header: GGUFHeader) -> dict[str, str]:
    """bos/eos/unk/pad token strings named by the metadata's ids."""
    tokens = _tokens(header)
    out = {}
    for name, key in (
        ("bos_token", "bos"),
        ("eos_token", "eos"),
        ("unk_token", "unknown"),
        ("pad_token", "padding"),
    ):
        idx = header.get(f"tokenizer.ggml.{key}_token_id")
        if isinstance(idx, int) and 0 <= idx < len(tokens):
            out[name] = tokens[idx]
    return out


def tokenizer_config(header: GGUFHeader) -> dict[str, Any]:
    """tokenizer_config.json: special tokens, BOS/EOS policy and the (untrusted) chat template.

    The template is stored verbatim and never rendered here; only the engine's sandbox renders it.
    """
    kind = header.get("tokenizer.ggml.model")
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": bool(header.get("tokenizer.ggml.add_bos_token", kind == "llama")),
        "add_eos_token": bool(header.get("tokenizer.ggml.add_eos_token", False)),
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(header.get(f"{header.get('general.architecture')}.context_length", 4096)),
        **special_tokens(header),
    }
    template = header.get("tokenizer.chat_template")
    if isinstance(template, str):
        config["chat_template"] = template
    return config
