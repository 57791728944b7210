"""The picker's two lists: mains by size with a suggested role, drafts with plain-words refusals.

The order, roles and reasons come from app.engine.library.roles, which `python -m app models`
also uses, so the command line lists exactly what the picker offers.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QHBoxLayout, QLabel, QListView, QPushButton, QVBoxLayout, QWidget

from app.engine.library.compat import Verdict
from app.engine.library.facts import ModelFacts
from app.engine.library.ranking import rank_drafts
from app.engine.library.roles import (
    DRAFT,
    by_size,
    hidden_summary,
    plain_reason,
    recommended_drafts,
    suggested_role,
    unusable_words,
)

KEY = Qt.ItemDataRole.UserRole
ROLE_WORDS = {DRAFT: "suggested as a draft", "main": "suggested as main"}


def fill_mains(
    model: QStandardItemModel, facts: list[ModelFacts], describe: Callable[[ModelFacts], str]
) -> None:
    """Largest first, each with the role the library suggests for it; a damaged or unreadable
    folder last, greyed, with the reason in place of its description."""
    model.clear()
    for f in by_size(facts):
        line = (
            f"{describe(f)} · {ROLE_WORDS[suggested_role(f, facts)]}"
            if f.usable
            else f"✕ {unusable_words(f)}"
        )
        item = QStandardItem(f"{f.name}\n{line}")
        item.setData(f.path, KEY)
        item.setToolTip("\n".join((f.path, *f.problems, *f.warnings)))
        item.setEnabled(f.usable)
        model.appendRow(item)


def fill_draft_rows(
    model: QStandardItemModel,
    main: ModelFacts,
    verdicts: list[tuple[ModelFacts, Verdict]],
    *,
    show_hidden: bool,
    arena: dict[str, str],
    describe: Callable[[ModelFacts], str],
) -> tuple[str, int]:
    """Append the main's drafts after plain/lookup; returns (the toggle's text, "" when nothing is
    hidden; the number of compatible drafts).

    A refused draft shows the plain reason; the checker's evidence stays in its tooltip."""
    ranked = rank_drafts(main, verdicts)
    for draft, verdict in ranked:
        if not verdict.compatible and not show_hidden:
            continue
        note = f"\n{arena[draft.path]}" if verdict.compatible and draft.path in arena else ""
        line = describe(draft) if verdict.compatible else f"✕ {plain_reason(main, draft, verdict)}"
        item = QStandardItem(f"{draft.name}\n{line}{note}")
        item.setData(draft.path, KEY)
        evidence = [r.message for r in verdict.reasons]
        item.setToolTip(
            ("Details:\n" if not verdict.compatible else "") + ("\n".join(evidence) or "compatible")
        )
        item.setEnabled(verdict.compatible)
        model.appendRow(item)
    summary = hidden_summary(ranked)
    toggle = (
        summary.replace(" hidden ", " that can't be used ", 1) + " — shown greyed"
        if show_hidden
        else summary + " — show"
    )
    return (toggle if summary else ""), sum(v.compatible for _, v in ranked)


def checking_text(total: int, done: int = 0) -> str:
    """The draft list's row while the main's drafts are checked: "Checking 7 drafts… 3 done"."""
    noun = "draft" if total == 1 else "drafts"
    return f"Checking {total} {noun}…" + (f" {done} done" if done else "")


def checking_row(total: int, done: int = 0) -> QStandardItem:
    """Greyed and never picked: it only says the list is not complete yet, and why."""
    item = QStandardItem(checking_text(total, done))
    item.setToolTip(
        "Each model's tokenizer is read to see whether it can guess ahead for this main model. "
        "The first check of a model takes a few seconds; later ones are remembered."
    )
    item.setEnabled(False)
    return item


class DraftSuggestions(QWidget):
    """Below the draft list: hub drafts of the main's family when no local draft fits, and
    "Measure now" to race the chosen draft in the arena."""

    def __init__(
        self,
        drafts: QListView,
        download: Callable[[str], None],
        measure: Callable[[], None],
        human_bytes: Callable[[float], str],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._download, self._human = download, human_bytes
        self.note = QLabel("")
        self.note.setWordWrap(True)
        self.buttons: list[QPushButton] = []
        self.rows = QVBoxLayout()
        self.measure_button = QPushButton("Measure now")
        self.measure_button.setToolTip("Race this draft against plain decoding in the draft arena")
        self.measure_button.clicked.connect(measure)
        # Only a draft model can be raced: not plain decoding, prompt lookup or a refused draft.
        drafts.selectionModel().currentChanged.connect(
            lambda index, _: self.measure_button.setEnabled(
                index.isValid() and bool(index.flags() & Qt.ItemFlag.ItemIsEnabled) and index.row() >= 2
            )
        )
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note)
        layout.addLayout(self.rows)
        bottom = QHBoxLayout()
        bottom.addStretch(1)
        bottom.addWidget(self.measure_button)
        layout.addLayout(bottom)

    def show_for(self, main: ModelFacts | None, compatible: int, checked: bool) -> None:
        for button in self.buttons:
            button.deleteLater()
        self.buttons = []
        offers = recommended_drafts(main) if main is not None and checked and not compatible else []
        if main is not None and checked and not compatible:
            self.note.setText(
                "No model here can draft for this one, so it will answer without a draft."
                + (" A recommended draft can be downloaded:" if offers else "")
            )
        self.note.setVisible(main is not None and checked and not compatible)
        for offer in offers:
            button = QPushButton(f"Download {offer.repo} (about {self._human(offer.approx_bytes)})")
            button.clicked.connect(lambda _=False, repo=offer.repo: self._download(repo))
            self.rows.addWidget(button)
            self.buttons.append(button)
