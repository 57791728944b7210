"""Loading a main model with a draft only when the draft may speculate for it.

The model picker is not the only way to a pair: the worker, the command-line tools and the
arena load pairs too, so all of them come through here and meet the picker's rules. The check
reads tokenizer and config files only; a draft the rules refuse is never loaded at all.
"""

from __future__ import annotations

import threading
from pathlib import Path

from app.engine.decoding.loading import ModelLoadError, ModelPair, load_pair
from app.engine.library.compat import Verdict, check_pair
from app.engine.library.discovery import resolve_model
from app.engine.library.roles import refusal_kind
from app.engine.library.store import Store


class IncompatiblePair(ModelLoadError):
    """The draft may not speculate for the main; the message gives the first reason."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        reason = verdict.refusals[0].message if verdict.refusals else "incompatible"
        super().__init__(
            f"the draft {verdict.draft} cannot speculate for {verdict.main}: {reason}",
            f"the draft model can't guess ahead for this main model ({refusal_kind(verdict)})",
        )


def require_compatible(main: str | Path, draft: str | Path, store: Store | None = None) -> Verdict:
    """The pair's verdict; raises IncompatiblePair when it refuses, ModelLoadError when a model
    cannot be found to check."""
    try:
        main_dir, draft_dir = resolve_model(str(main)), resolve_model(str(draft))
    except (FileNotFoundError, ValueError) as exc:
        raise ModelLoadError(
            f"could not check the pair: {exc}", "the models could not be found to check them"
        ) from exc
    verdict = check_pair(main_dir, draft_dir, store)
    if not verdict.compatible:
        raise IncompatiblePair(verdict)
    return verdict


def _local(source: str | Path) -> bool:
    """Whether `source` can be checked before loading: a model folder, or a repo already
    downloaded. Anything else goes to the loader first, whose refusal names the problem."""
    try:
        resolve_model(str(source))
    except (FileNotFoundError, ValueError):
        return False
    return True


def load_checked_pair(
    main: str | Path,
    draft: str | Path | None = None,
    *,
    force: bool = False,
    store: Store | None = None,
    cancel: threading.Event | None = None,
) -> ModelPair:
    """Load `main` and `draft` (see loading.load_pair) once the compatibility check passes.

    `force` skips the check, for experiments. A hub repo that is not downloaded yet is checked
    once the load has fetched it, before the pair is handed out."""
    if draft is None or force:
        return load_pair(main, draft, cancel)
    if _local(main) and _local(draft):
        require_compatible(main, draft, store)
        return load_pair(main, draft, cancel)
    pair = load_pair(main, draft, cancel)  # a repo not downloaded yet; the loader refuses any other name
    require_compatible(main, draft, store)
    return pair
