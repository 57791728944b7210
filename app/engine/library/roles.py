"""Suggested roles and plain-words refusals for the picker and `python -m app models`.

Both the window and the command line read the library through these functions, so a script (or
a test) sees the same order, roles and reasons the picker offers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.library.compat import Verdict, check_pair
from app.engine.library.facts import ModelFacts
from app.engine.library.ranking import rank_drafts
from app.engine.library.recommended import RECOMMENDED
from app.engine.library.store import Store
from app.engine.library.vocab import Vocabulary

MAIN, DRAFT = "main", "draft"
# A model at most this share of a same-vocabulary model's size is suggested as its draft.
DRAFT_SHARE = 0.5
# Name parts from the size onwards (135M, 0.5B, Instruct, Q4_K_M, 4bit…) are not the family.
_NOT_FAMILY = re.compile(
    r"^(\d+(\.\d+)?[bBmMkK]|instruct|chat|base|it|q\d.*|\d+bit|mlx|gguf|fp16|bf16)$", re.I
)
_VOCAB_CODES = frozenset(
    {"tokenizer_type", "token_text", "special_flag", "draft_only_ids", "vocab_size", "draft_rows"}
)
_TOKEN_CODES = frozenset({"bos_id", "eos_id", "pad_id", "turn_ends", "tokenizer_missing"})


def family_name(name: str) -> str:
    """The readable family of a model name: "SmolLM2-135M-Instruct-4bit" gives "SmolLM2"."""
    base = name.rstrip("/").rsplit("/", 1)[-1]
    parts = base.split("-")
    kept: list[str] = []
    for part in parts:
        if kept and _NOT_FAMILY.match(part):
            break
        kept.append(part)
    return "-".join(kept) or base


def _vocab_key(f: ModelFacts) -> str:
    return f.vocab_fingerprint or f"arch:{f.architecture}"


def by_size(facts: list[ModelFacts]) -> list[ModelFacts]:
    """Usable models first, the largest first: the order of the picker's main list."""
    return sorted(facts, key=lambda f: (not f.usable, -(f.params or 0), f.name))


def suggested_role(model: ModelFacts, library: list[ModelFacts]) -> str:
    """ "draft" when a much larger usable model shares its vocabulary, otherwise "main"."""
    if not model.params:
        return MAIN
    for other in library:
        if (
            other.path != model.path
            and other.usable
            and other.params
            and _vocab_key(other) == _vocab_key(model)
            and model.params <= DRAFT_SHARE * other.params
        ):
            return DRAFT
    return MAIN


def unusable_words(model: ModelFacts) -> str:
    """Why a model can't be used at all, for its greyed row: "damaged or unreadable: …"."""
    problem = model.problems[0].removeprefix("damaged: ") if model.problems else "no problem found"
    return f"damaged or unreadable: {problem}"


def refusal_kind(verdict: Verdict) -> str:
    """A short group for counting hidden drafts: "different vocabulary" and the like."""
    codes = {r.code for r in verdict.refusals}
    if codes & _VOCAB_CODES:
        return "different vocabulary"
    if codes & _TOKEN_CODES:
        return "different special tokens"
    if "same_model" in codes:
        return "the same model"
    if "unusable" in codes:
        return "damaged"
    if "draft_not_smaller" in codes:
        return "not smaller than the main"
    return "can't draft"


def plain_reason(main: ModelFacts, draft: ModelFacts, verdict: Verdict) -> str:
    """Why `draft` cannot speculate for `main`, in words a non-expert understands."""
    d, m = family_name(draft.name), family_name(main.name)
    codes = {r.code for r in verdict.refusals}
    if d.lower() == m.lower():
        d, m = draft.name.rsplit("/", 1)[-1], main.name.rsplit("/", 1)[-1]
    if "unusable" in codes:
        return f"{d} is {unusable_words(draft)}" if draft.problems else f"{m} is {unusable_words(main)}"
    if "same_model" in codes:
        same = "This is another copy of" if d == m else f"{d} is the same model as"
        return f"{same} {m}: a model can't draft for itself"
    if codes & _VOCAB_CODES:
        return f"{d} uses a different vocabulary from {m}; a draft must share the main model's tokenizer"
    if codes & _TOKEN_CODES:
        return f"{d} marks the start or end of a reply differently from {m}; a draft must share the main model's tokenizer"
    if "draft_not_smaller" in codes:
        return f"{d} is not smaller than {m}, so it cannot make {m} faster"
    if "vision" in codes:
        return "Models that read images can't be used as drafts here yet"
    if codes & {"draft_untrimmable", "draft_window"}:
        return (
            f"{d} can't take back its guesses the way a draft must (its memory of the text can't be rewound)"
        )
    return f"{d} can't draft for {m}; hover for details"


def hidden_summary(ranked: list[tuple[ModelFacts, Verdict]]) -> str:
    """ "4 drafts hidden (different vocabulary)", or "" when every draft fits."""
    refused = [v for _, v in ranked if not v.compatible]
    if not refused:
        return ""
    kinds = sorted({refusal_kind(v) for v in refused})
    noun = "draft" if len(refused) == 1 else "drafts"
    return f"{len(refused)} {noun} hidden ({', '.join(kinds)})"


@dataclass(frozen=True, slots=True)
class DownloadableDraft:
    repo: str
    approx_bytes: int


def size_in_name(name: str) -> float | None:
    """Parameters as a name states them ("0.5B", "135M"), or None."""
    for part in name.rsplit("/", 1)[-1].split("-"):
        m = re.fullmatch(r"(\d+(?:\.\d+)?)([bBmM])", part)
        if m:
            return float(m.group(1)) * (1e9 if m.group(2) in "bB" else 1e6)
    return None


def recommended_drafts(main: ModelFacts) -> list[DownloadableDraft]:
    """Recommended hub drafts of the main's family that are much smaller than it, for when no
    local draft fits."""
    family = family_name(main.name).lower()
    own = main.name.rsplit("/", 1)[-1].lower()
    out: list[DownloadableDraft] = []
    for pair in RECOMMENDED:
        repo_family = family_name(pair.draft_repo).lower()
        same = repo_family == family or repo_family.startswith(family) or family.startswith(repo_family)
        size = size_in_name(pair.draft_repo)
        small = not main.params or size is None or size <= DRAFT_SHARE * main.params
        if same and small and pair.draft_repo.rsplit("/", 1)[-1].lower() != own:
            if all(x.repo != pair.draft_repo for x in out):
                out.append(DownloadableDraft(pair.draft_repo, pair.draft_bytes))
    return out


def draft_candidates(main: ModelFacts, library: list[ModelFacts]) -> list[ModelFacts]:
    """The models checked as drafts for `main`: every other one."""
    return [d for d in library if d.path != main.path]


def check_drafts(
    main: ModelFacts,
    library: list[ModelFacts],
    store: Store | None = None,
    on_checked: Callable[[int], None] | None = None,
    vocabularies: dict[Path, Vocabulary] | None = None,
) -> list[tuple[ModelFacts, Verdict]]:
    """Every other model's verdict as a draft for `main`, as the picker asks for them; the main's
    vocabulary is read once. `on_checked(n)` follows each verdict, so a picker can say how far
    it has got: a first check of a large library reads every tokenizer and takes a while.
    `vocabularies` carries what was read from one main's check to the next."""
    vocabularies = {} if vocabularies is None else vocabularies
    out = []
    for d in draft_candidates(main, library):
        out.append((d, check_pair(Path(main.path), Path(d.path), store, vocabularies)))
        if on_checked is not None:
            on_checked(len(out))
    return out


def describe_library(
    facts: list[ModelFacts], verdicts: dict[str, list[tuple[ModelFacts, Verdict]]]
) -> list[dict[str, Any]]:
    """The library as the picker shows it: one entry per model, in the main list's order, with
    its ranked compatible drafts and the drafts it hides (with the plain reason)."""
    out: list[dict[str, Any]] = []
    for f in by_size(facts):
        ranked = rank_drafts(f, verdicts.get(f.path, []))
        out.append(
            {
                "name": f.name,
                "path": f.path,
                "family": family_name(f.name),
                "architecture": f.architecture,
                "parameters": f.params,
                "quantization": f"{f.bits}-bit" if f.bits else None,
                "context_length": f.context_length,
                "usable": f.usable,
                "suggested_role": suggested_role(f, facts),
                "compatible_drafts": [d.path for d, v in ranked if v.compatible],
                "hidden_drafts": [
                    {"path": d.path, "kind": refusal_kind(v), "reason": plain_reason(f, d, v)}
                    for d, v in ranked
                    if not v.compatible
                ],
            }
        )
    return out
