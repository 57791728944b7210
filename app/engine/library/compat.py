"""Whether a draft model may speculate for a main model, decided from tokenizer and config files.

Speculation feeds the draft's token ids straight into the main, so the two must agree on what
every id means, on which ids end a turn, and the draft's cache must be rewindable. Each reason
names its evidence so a user can see why a pair was refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.library.facts import ModelFacts, model_facts
from app.engine.library.store import Store
from app.engine.library.vocab import VocabError, Vocabulary, read_vocabulary

VOCAB_SLACK = 128  # mlx-lm's own limit: padded embedding rows may differ by this much
REFUSE, WARN = "refuse", "warn"
CACHE_KIND = "compat-3"  # its number changes whenever the rules do, so old verdicts are not reused


@dataclass(frozen=True, slots=True)
class Reason:
    code: str
    severity: str  # "refuse" or "warn"
    message: str


@dataclass(frozen=True, slots=True)
class Verdict:
    main: str
    draft: str
    reasons: tuple[Reason, ...]

    @property
    def compatible(self) -> bool:
        return not any(r.severity == REFUSE for r in self.reasons)

    @property
    def refusals(self) -> tuple[Reason, ...]:
        return tuple(r for r in self.reasons if r.severity == REFUSE)

    def summary(self) -> str:
        first = self.refusals[0].message if self.refusals else None
        return "compatible" if first is None else f"incompatible: {first}"

    def to_json(self) -> dict[str, Any]:
        return {
            "main": self.main,
            "draft": self.draft,
            "compatible": self.compatible,
            "reasons": [{"code": r.code, "severity": r.severity, "message": r.message} for r in self.reasons],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        return cls(data["main"], data["draft"], tuple(Reason(**r) for r in data["reasons"]))


def _show(text: str | None) -> str:
    return "(none)" if text is None else repr(text)


def _token_reasons(main: Vocabulary, draft: Vocabulary) -> list[Reason]:
    out: list[Reason] = []
    if main.kind != draft.kind:
        out.append(
            Reason(
                "tokenizer_type",
                REFUSE,
                f"tokenizer types differ: {main.kind} in the main, {draft.kind} in the draft",
            )
        )
    shared = sorted(main.tokens.keys() & draft.tokens.keys())
    differ = [i for i in shared if main.tokens[i] != draft.tokens[i]]
    if differ:
        i = differ[0]
        more = f" ({len(differ) - 1} more ids differ)" if len(differ) > 1 else ""
        out.append(
            Reason(
                "token_text",
                REFUSE,
                f"token {i} differs: {main.tokens[i]!r} in the main, {draft.tokens[i]!r} in the draft{more}",
            )
        )
    flips = [i for i in shared if (i in main.special) != (i in draft.special) and i not in differ]
    if flips:
        i = flips[0]
        where = "main" if i in main.special else "draft"
        out.append(
            Reason("special_flag", REFUSE, f"token {i} ({main.tokens[i]!r}) is special only in the {where}")
        )
    missing = sorted(draft.tokens.keys() - main.tokens.keys())
    if missing:
        i = missing[0]
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        out.append(
            Reason(
                "draft_only_ids",
                REFUSE,
                f"the draft can emit token {i} ({draft.tokens[i]!r}){more}, which the main does not have",
            )
        )
    if abs(main.rows - draft.rows) > VOCAB_SLACK:
        out.append(
            Reason(
                "vocab_size",
                REFUSE,
                f"vocabulary sizes differ by more than {VOCAB_SLACK}: {main.rows} in the main, {draft.rows} in the draft",
            )
        )
    elif draft.rows > main.rows:
        out.append(
            Reason(
                "draft_rows",
                REFUSE,
                f"the draft's output layer has {draft.rows} rows but the main embeds only {main.rows} ids",
            )
        )
    for name in ("bos", "eos", "pad"):
        a, b = getattr(main, name), getattr(draft, name)
        if a == b:
            continue
        text = f"{name.upper()} ids differ: {a} {_show(main.tokens.get(a))} in the main, {b} {_show(draft.tokens.get(b))} in the draft"
        # An id set on one side only is a warning for BOS/pad; EOS must always agree.
        severity = REFUSE if name == "eos" or (a is not None and b is not None) else WARN
        out.append(Reason(f"{name}_id", severity, text))
    if main.turn_ends != draft.turn_ends:
        only_main = sorted(main.turn_ends - draft.turn_ends)
        only_draft = sorted(draft.turn_ends - main.turn_ends)
        out.append(
            Reason(
                "turn_ends",
                REFUSE,
                "end-of-turn tokens differ: "
                f"main only {[(i, main.tokens.get(i)) for i in only_main]}, "
                f"draft only {[(i, draft.tokens.get(i)) for i in only_draft]}",
            )
        )
    return out


def same_model_other_precision(a: ModelFacts, b: ModelFacts) -> bool:
    """Whether two folders hold one model at two precisions: the same architecture, parameter
    count (read from the tensors' shapes, so it does not change with quantization) and vocabulary,
    stored at different bits."""
    return (
        a.params is not None
        and a.params == b.params
        and a.architecture == b.architecture
        and a.vocab_fingerprint is not None
        and a.vocab_fingerprint == b.vocab_fingerprint
        and a.bits != b.bits
    )


def _precision(facts: ModelFacts) -> str:
    return f"{facts.bits} bits" if facts.bits else "full precision"


def _model_reasons(main: ModelFacts, draft: ModelFacts) -> list[Reason]:
    out: list[Reason] = []
    for role, facts in (("main", main), ("draft", draft)):
        out += [Reason("unusable", REFUSE, f"the {role} is unusable: {p}") for p in facts.problems]
        if facts.vision:
            out.append(Reason("vision", REFUSE, f"the {role} ({facts.name}) is a vision model"))
    if draft.trim == "none":
        out.append(
            Reason(
                "draft_untrimmable",
                REFUSE,
                f"the draft's cache ({draft.architecture}) holds recurrent state and cannot be rewound",
            )
        )
    elif draft.trim == "window":
        out.append(
            Reason(
                "draft_window",
                WARN,
                f"the draft's cache rewinds only inside its {draft.sliding_window}-token sliding window",
            )
        )
    if Path(main.path).resolve() == Path(draft.path).resolve():
        out.append(Reason("same_model", REFUSE, "the draft is the main model itself"))
    elif main.weights_digest is not None and main.weights_digest == draft.weights_digest:
        out.append(
            Reason("same_model", REFUSE, f"the draft holds the same weights as the main ({main.path})")
        )
    elif same_model_other_precision(main, draft):
        out.append(
            Reason(
                "same_model",
                REFUSE,
                f"the draft is the main model itself at {_precision(draft)} (the main is at "
                f"{_precision(main)}): a draft must be a smaller model to save time",
            )
        )
    elif main.params and draft.params and draft.params >= main.params:
        out.append(
            Reason(
                "draft_not_smaller",
                WARN,
                f"the draft ({draft.params / 1e9:.2f}B parameters) is not smaller than the main "
                f"({main.params / 1e9:.2f}B): speculation will likely be slower",
            )
        )
    return out


def check_pair(
    main_dir: Path,
    draft_dir: Path,
    store: Store | None = None,
    vocabularies: dict[Path, Vocabulary] | None = None,
) -> Verdict:
    """The verdict for one pair; cached by both folders' fingerprints. `vocabularies`, when given,
    keeps the vocabularies read (up to `KEEP_VOCABULARIES`), so checking many pairs parses each
    tokenizer (seconds for a large vocabulary) once instead of once per pair."""
    store = store or Store()
    vocabularies = {} if vocabularies is None else vocabularies  # facts not cached read them too
    main = model_facts(Path(main_dir), store=store, vocabularies=vocabularies)
    draft = model_facts(Path(draft_dir), store=store, vocabularies=vocabularies)
    key = f"{main.fingerprint}:{draft.fingerprint}"
    cached = store.get(CACHE_KIND, key)
    if cached is not None:
        return Verdict.from_json(cached)
    reasons = _model_reasons(main, draft)
    try:
        main_vocab, draft_vocab = (
            read_vocabulary(Path(main_dir), vocabularies),
            read_vocabulary(Path(draft_dir), vocabularies),
        )
    except VocabError as exc:
        reasons.append(Reason("tokenizer_missing", REFUSE, str(exc)))
    else:
        reasons = _token_reasons(main_vocab, draft_vocab) + reasons
    verdict = Verdict(str(main_dir), str(draft_dir), tuple(reasons))
    store.put(CACHE_KIND, key, verdict.to_json())
    return verdict
