"""The draft arena dialog: for one main model, time every compatible local draft and prompt lookup
on a small prompt set, rank them by measured speedup over plain, and load the winner in one click.

The library scan and the compatibility checks run as background tasks; the timing runs on the
engine worker (RunArena), which reports progress and the ranking as worker messages. Speedups
here are measured; the best fixed k's is estimated from the measured rounds and is labelled so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.engine.decoding.events import EngineError
from app.engine.features.arena import (
    LOOKUP,
    ArenaProgress,
    ArenaResult,
    best_k_text,
    load_results,
)
from app.engine.features.figures import percent_text, speedup_text
from app.engine.library.compat import Verdict
from app.engine.library.discovery import Sources, scan_library
from app.engine.library.facts import ModelFacts
from app.engine.library.ranking import rank_drafts
from app.engine.library.roles import check_drafts, draft_candidates
from app.engine.library.store import Store
from app.engine.protocol import ArenaFinished, RunArena, WorkerMessage
from app.ui.arena.arena_prompts import PromptList
from app.ui.common.background import BackgroundTasks
from app.ui.common.engine_bridge import EngineBridge

KEY = Qt.ItemDataRole.UserRole
COLUMNS = ("Rank", "Draft", "Speedup (measured)", "Acceptance", "Best k (estimated)", "Per prompt class")


def candidate_name(candidate: str) -> str:
    return "Prompt lookup (no model)" if candidate == LOOKUP else Path(candidate).name or candidate


class ArenaDialog(QDialog):
    """`apply(main, draft or None, mode)` asks the window to load the chosen pair."""

    apply = Signal(str, object, str)
    running_changed = Signal(bool)

    def __init__(
        self,
        bridge: EngineBridge,
        sources: Sources,
        settings: QSettings,
        *,
        main: str | None = None,
        blocked: Callable[[], str | None] = lambda: None,
        store: Store | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Draft arena")
        self.bridge, self.sources, self.settings, self.store = bridge, sources, settings, store
        self.blocked = blocked  # why the worker cannot take the arena now (an answer is streaming)
        self.wanted_main = main
        self.facts: dict[str, ModelFacts] = {}
        self.request: int | None = None
        self.results: list[ArenaResult] = []
        self.cancelling = False
        self.last_progress: ArenaProgress | None = None
        self.background = BackgroundTasks(self, lambda exc: self.state.setText(f"Error: {exc}"))

        self.main = QComboBox()
        self.candidates, self.prompts = QListWidget(), PromptList(settings)
        self.add_button, self.remove_button, self.reset_button = (
            QPushButton("Add prompt"),
            QPushButton("Remove"),
            QPushButton("Built-ins"),
        )
        self.k, self.tokens = (
            QSpinBox(minimum=1, maximum=12, value=4),
            QSpinBox(minimum=8, maximum=1024, value=64),
        )
        self.run_button, self.cancel_button, self.use_button = (
            QPushButton("Run"),
            QPushButton("Cancel"),
            QPushButton("Use this draft"),
        )
        self.bar, self.state, self.summary = QProgressBar(), QLabel("Scanning models…"), QLabel("")
        self.state.setWordWrap(True)
        self.summary.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        self._layout()
        self.main.currentIndexChanged.connect(lambda *_: self._on_main_changed())
        self.add_button.clicked.connect(lambda: self.prompts.add_prompt())
        self.remove_button.clicked.connect(self.prompts.remove_current)
        self.reset_button.clicked.connect(self.prompts.restore_builtins)
        self.run_button.clicked.connect(self.run)
        self.cancel_button.clicked.connect(self.cancel)
        self.use_button.clicked.connect(self._use)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        bridge.batch.connect(self.on_batch)
        self._update_buttons()
        self.refresh()

    def _layout(self) -> None:
        form = QFormLayout()
        form.addRow("Main model", self.main)
        settings = QHBoxLayout()
        for label, w in (("Draft length k", self.k), ("Tokens per prompt", self.tokens)):
            settings.addWidget(QLabel(label))
            settings.addWidget(w)
        settings.addStretch(1)
        form.addRow("Runs", settings)
        lists = QHBoxLayout()
        left, right = QVBoxLayout(), QVBoxLayout()
        left.addWidget(QLabel("<b>Candidates</b> (compatible local drafts)"))
        left.addWidget(self.candidates)
        right.addWidget(QLabel("<b>Prompts</b> (double-click to edit)"))
        right.addWidget(self.prompts)
        buttons = QHBoxLayout()
        for b in (self.add_button, self.remove_button, self.reset_button):
            buttons.addWidget(b)
        right.addLayout(buttons)
        lists.addLayout(left, 1)
        lists.addLayout(right, 2)
        run = QHBoxLayout()
        for widget, stretch in ((self.run_button, 0), (self.cancel_button, 0), (self.bar, 1)):
            run.addWidget(widget, stretch)
        bottom = QHBoxLayout()
        bottom.addWidget(self.summary, 1)
        bottom.addWidget(self.use_button)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addLayout(lists, 2)
        layout.addLayout(run)
        layout.addWidget(self.state)
        layout.addWidget(self.table, 3)
        layout.addLayout(bottom)

    # -- models and candidates -------------------------------------------------------------
    def refresh(self) -> None:
        sources, store = self.sources, self.store
        self.background.run(lambda: scan_library(sources, store)[0], self._on_scanned)

    def _on_scanned(self, facts: list[ModelFacts]) -> None:
        self.facts = {f.path: f for f in facts if f.usable}
        self.main.blockSignals(True)
        self.main.clear()
        for f in sorted(self.facts.values(), key=lambda f: (-(f.params or 0), f.name)):
            self.main.addItem(f.name, f.path)
        at = self.main.findData(self.wanted_main) if self.wanted_main else -1
        self.main.setCurrentIndex(max(at, 0))
        self.main.blockSignals(False)
        self.state.setText(
            "" if self.facts else "No local models found: add a model folder or download a pair first."
        )
        self._on_main_changed()

    def select_main(self, main: str | None) -> None:
        """Preselect `main` (the loaded model) and rescan, unless a run is going on."""
        if self.running:
            return
        self.wanted_main = main or self.wanted_main
        self.refresh()

    def current_main(self) -> str | None:
        path = self.main.currentData()
        return str(path) if path else None

    def _on_main_changed(self) -> None:
        main = self.current_main()
        self.candidates.clear()
        self.show_results(load_results(main) if main else [], "Last arena for this model" if main else "")
        if main is None:
            return
        library, store, facts = list(self.facts.values()), self.store, self.facts[main]
        self.state.setText(f"Checking {len(draft_candidates(facts, library))} drafts…")
        self.background.run(
            lambda: (main, rank_drafts(facts, check_drafts(facts, library, store))),
            self._on_verdicts,
        )

    def _on_verdicts(self, result: tuple[str, list[tuple[ModelFacts, Verdict]]]) -> None:
        main, ranked = result
        if main != self.current_main():
            return
        self.candidates.clear()
        compatible = [d for d, v in ranked if v.compatible]
        for key, text in [(d.path, d.name) for d in compatible] + [(LOOKUP, candidate_name(LOOKUP))]:
            item = QListWidgetItem(text)
            item.setData(KEY, key)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked)
            self.candidates.addItem(item)
        refused = len(ranked) - len(compatible)
        self.state.setText(
            f"{len(compatible)} compatible draft(s)"
            + (f"; {refused} refused (see the picker)" if refused else "")
        )
        self._update_buttons()

    def checked_candidates(self) -> list[str]:
        items = (self.candidates.item(i) for i in range(self.candidates.count()))
        return [i.data(KEY) for i in items if i.checkState() == Qt.CheckState.Checked]

    # -- running ---------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.request is not None

    def run(self) -> bool:
        main, candidates = self.current_main(), self.checked_candidates()
        prompts = tuple(p for p, on in self.prompts.prompt_list() if on and p.text)
        reason = (
            self.blocked()
            or ("Choose a main model first." if main is None else None)
            or (None if candidates else "Tick at least one candidate.")
            or (None if prompts else "Tick at least one prompt with some text.")
        )
        if self.running or reason:
            self.state.setText(reason or "The arena is already running.")
            return False
        assert main is not None
        self.request = self.bridge.submit(
            RunArena(main, tuple(candidates), prompts, self.k.value(), self.tokens.value())
        )
        self.cancelling, self.last_progress = False, None
        self.bar.setRange(0, 0)
        self.state.setText("Loading the main model…")
        self.state.setToolTip("")  # a failed run's detail belongs to that run
        self._update_buttons()
        self.running_changed.emit(True)
        return True

    def cancel(self) -> None:
        if self.running:
            self.cancelling = True
            self.bridge.cancel(self.request)
            self.state.setText("Cancelling after the current run…")
            self.cancel_button.setEnabled(False)

    def on_batch(self, batch: tuple[WorkerMessage, ...]) -> None:
        for message in batch:
            if self.request is None or message.request != self.request:
                continue
            event = message.event
            if isinstance(event, ArenaProgress):
                if self.cancelling:  # the state line says it is cancelling: no more "Run n of m"
                    continue
                self.last_progress = event
                self.bar.setRange(0, event.total)
                self.bar.setValue(event.done)
                self.state.setText(f"Run {min(event.done + 1, event.total)} of {event.total}: {event.label}")
            elif isinstance(event, ArenaFinished):
                self._stopped(complete=not event.cancelled)
                if event.cancelled:
                    self.state.setText("Cancelled: nothing was saved.")
                    self.show_results(load_results(event.main), "Last complete arena")
                else:
                    self.state.setText(
                        "Finished." if event.saved else "Finished, but the results could not be saved."
                    )
                    self.show_results(list(event.results), "Ranking")
            elif isinstance(event, EngineError):
                if event.kind == "notice":
                    self.state.setText(event.message)
                    continue
                self._stopped()
                self.state.setText(f"The arena could not run: {event.plain or event.message}")
                self.state.setToolTip(event.message if event.plain else "")  # the detail, on hover

    def _stopped(self, complete: bool = False) -> None:
        self.request, self.cancelling = None, False
        self.bar.setRange(0, 1)
        self.bar.setValue(1 if complete else 0)
        self._update_buttons()
        self.running_changed.emit(False)

    # -- results ---------------------------------------------------------------------------
    def show_results(self, results: list[ArenaResult], title: str) -> None:
        self.results = results
        self.table.setRowCount(len(results))
        for row, r in enumerate(results):
            cells = (
                str(row + 1),
                candidate_name(r.candidate),
                speedup_text(r.speedup) if not r.error else "—",
                percent_text(r.acceptance) if not r.error and r.acceptance is not None else "—",
                best_k_text(r),
                r.error or " · ".join(f"{c} {speedup_text(s)}" for c, s in r.by_class),
            )
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(KEY, r.candidate)
                if r.error:
                    item.setToolTip(r.error)
                self.table.setItem(row, col, item)
        self.table.resizeColumnsToContents()
        if results:
            self.table.selectRow(0)
            best = results[0]
            verdict = (
                f"{candidate_name(best.candidate)} is fastest: {speedup_text(best.speedup)} plain decoding, measured"
                if not best.error and best.speedup > 0
                else "no candidate could run"
            )
            self.summary.setText(f"<b>{title}:</b> {verdict}." if title else verdict)
        else:
            self.summary.setText(f"<b>{title}:</b> none yet. Press Run." if title else "")
        self._update_buttons()

    def selected_result(self) -> ArenaResult | None:
        rows = self.table.selectionModel().selectedRows()
        return self.results[rows[0].row()] if rows and rows[0].row() < len(self.results) else None

    def _update_buttons(self) -> None:
        r = self.selected_result()
        self.run_button.setEnabled(not self.running)
        self.cancel_button.setEnabled(self.running)
        self.use_button.setEnabled(not self.running and r is not None and not r.error)

    def _use(self) -> None:
        r, main = self.selected_result(), self.current_main()
        if r is None or r.error or main is None:
            return
        if r.candidate == LOOKUP:
            self.apply.emit(main, None, "lookup")
        else:
            self.apply.emit(main, r.candidate, "model")
        self.state.setText(f"Loading {Path(main).name} with {candidate_name(r.candidate)}…")

    def closeEvent(self, e: QCloseEvent) -> None:
        """Closing stops a run: nobody would see its end."""
        self.cancel()
        super().closeEvent(e)

    def reject(self) -> None:  # Esc closes without a closeEvent
        self.cancel()
        super().reject()
