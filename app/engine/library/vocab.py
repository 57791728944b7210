"""A model's vocabulary and special ids, read from tokenizer and config files alone.

`tokenizers` parses tokenizer.json (pure data); transformers is never used, so nothing a model
folder ships can run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from app.engine.library.safety import read_json

# Texts of end-of-turn markers used by common chat templates.
TURN_END_TEXTS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|eom_id|>", "<|endofturn|>")


class VocabError(ValueError):
    """The tokenizer files are missing or unreadable."""


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """id -> token text, which ids are special, and the ids the chat loop stops or pads with."""

    kind: str
    tokens: dict[int, str]
    special: frozenset[int]
    bos: int | None
    eos: int | None
    pad: int | None
    turn_ends: frozenset[int]
    rows: int  # the model's vocab_size: ids its embedding holds and its output layer can emit

    def fingerprint(self) -> str:
        digest = hashlib.sha256(self.kind.encode())
        for i in sorted(self.tokens):
            digest.update(f"{i}\x00{self.tokens[i]}\x00{int(i in self.special)}\x01".encode())
        return digest.hexdigest()[:16]


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _ids(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def _special_id(
    name: str, config: dict[str, Any], tok_config: dict[str, Any], by_text: dict[str, int]
) -> int | None:
    ids = _ids(config.get(f"{name}_token_id"))
    if ids:
        return ids[0]
    text = _token_text(tok_config.get(f"{name}_token"))
    return by_text.get(text) if text is not None else None


def _kind(spec: dict[str, Any]) -> str:
    """The model type plus how it reaches bytes: byte-level BPE and SentencePiece-style BPE differ."""
    model = spec.get("model") or {}
    kind = str(model.get("type") or "unknown")
    if model.get("byte_fallback"):
        return f"{kind} (byte fallback)"
    if '"ByteLevel"' in json.dumps(spec.get("decoder")):
        return f"{kind} (byte-level)"
    return kind


def _declared_tokens(spec: dict[str, Any]) -> tuple[dict[int, str], frozenset[int]]:
    """id -> text exactly as tokenizer.json declares it; added tokens override the model's."""
    model = spec.get("model") or {}
    vocab = model.get("vocab")
    tokens: dict[int, str] = {}
    if isinstance(vocab, dict):
        tokens = {i: t for t, i in vocab.items() if isinstance(i, int)}
    elif isinstance(vocab, list):  # Unigram: [piece, score] in id order
        tokens = {i: p[0] for i, p in enumerate(vocab) if isinstance(p, list) and p and isinstance(p[0], str)}
    special = set()
    for added in spec.get("added_tokens") or []:
        if (
            isinstance(added, dict)
            and isinstance(added.get("id"), int)
            and isinstance(added.get("content"), str)
        ):
            tokens[added["id"]] = added["content"]
            if added.get("special"):
                special.add(added["id"])
    return tokens, frozenset(special)


# vocabularies one scan keeps (about 20 MB each for 150k tokens); past that they are re-read, so
# a large library costs time, never memory without bound
KEEP_VOCABULARIES = 8


def read_vocabulary(folder: Path, kept: dict[Path, Vocabulary] | None = None) -> Vocabulary:
    """The folder's vocabulary; with `kept`, read once for every caller that shares it (parsing
    a large tokenizer takes seconds, and a pair's facts and its check both need it)."""
    if kept is not None and folder in kept:
        return kept[folder]
    vocabulary = _read_vocabulary(folder)
    if kept is not None and len(kept) < KEEP_VOCABULARIES:
        kept[folder] = vocabulary
    return vocabulary


def _read_vocabulary(folder: Path) -> Vocabulary:
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise VocabError(f"{folder.name} has no tokenizer.json")
    try:
        text = path.read_text(encoding="utf-8")
        Tokenizer.from_str(text)  # the file must be one `tokenizers` (and so mlx-lm) can load
        spec = json.loads(text)
    except Exception as exc:  # tokenizers raises a bare Exception on bad files
        raise VocabError(f"{folder.name}: tokenizer.json could not be read ({exc})") from exc
    tokens, special = _declared_tokens(spec)
    by_text = {t: i for i, t in sorted(tokens.items(), reverse=True)}
    config = read_json(folder / "config.json")
    nested = config.get("text_config")
    text_config: dict[str, Any] = nested if isinstance(nested, dict) else {}
    merged = {**text_config, **{k: v for k, v in config.items() if v is not None}}
    tok_config = read_json(folder / "tokenizer_config.json")
    generation = read_json(folder / "generation_config.json")
    eos_ids = set(_ids(merged.get("eos_token_id"))) | set(_ids(generation.get("eos_token_id")))
    eos_text = _token_text(tok_config.get("eos_token"))
    if eos_text in by_text:
        eos_ids.add(by_text[eos_text])
    turn_ends = eos_ids | {by_text[t] for t in TURN_END_TEXTS if t in by_text}
    rows = merged.get("vocab_size")
    return Vocabulary(
        kind=_kind(spec),
        tokens=tokens,
        special=special,
        bos=_special_id("bos", merged, tok_config, by_text),
        eos=_special_id("eos", merged, tok_config, by_text),
        pad=_special_id("pad", merged, tok_config, by_text),
        turn_ends=frozenset(turn_ends),
        rows=rows if isinstance(rows, int) and rows > 0 else (max(tokens) + 1 if tokens else 0),
    )
