"""The pair picker: choose a main model and a draft, see why drafts are refused, check memory fit.

Scans, compatibility checks and downloads run as background tasks (app.ui.common.background); their
results come back on the GUI thread, which never reads tokenizers or walks folders itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListView,
    QMessageBox,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.engine.features.arena import arena_note, load_results
from app.engine.library.compat import Verdict
from app.engine.library.discovery import Found, Sources, scan_library
from app.engine.library.facts import ModelFacts
from app.engine.library.memory import MemoryFit, memory_fit
from app.engine.library.precision import DevicePrecision, this_device
from app.engine.library.recommended import recommended_pairs
from app.engine.library.roles import check_drafts, draft_candidates
from app.engine.library.store import Store
from app.ui.common.background import BackgroundTasks, Job
from app.ui.common.error_banner import show_error_dialog
from app.ui.common.platform_words import machines, this_machine
from app.ui.common.settings import app_settings
from app.ui.library.download_panel import DownloadPanel, human_bytes
from app.ui.library.empty_library import EmptyLibrary
from app.ui.machines.hosts_dialog import HostsDialog
from app.ui.picker.draft_list import (
    DraftSuggestions,
    checking_row,
    checking_text,
    fill_draft_rows,
    fill_mains,
)
from app.ui.picker.precision_notice import PrecisionNotice, select_path

PLAIN, LOOKUP = "plain", "lookup"
KEY = Qt.ItemDataRole.UserRole


@dataclass(frozen=True, slots=True)
class PickedPair:
    main: str
    draft: str | None  # a model folder when mode is "model"
    mode: str  # "model", "plain" or "lookup"
    context: int


def describe(f: ModelFacts) -> str:
    bits = f"{f.bits}-bit" if f.bits else "? bits"
    params = (
        "? params"
        if not f.params
        else f"{f.params / 1e9:.2f}B"
        if f.params >= 1e9
        else f"{f.params / 1e6:.1f}M"
    )
    ctx = f"{f.context_length // 1024}k ctx" if f.context_length else "? ctx"
    kind = "vision" if f.vision else "text"
    return f"{f.architecture} · {params} · {bits} · {human_bytes(f.size_bytes)} · {ctx} · {kind}"


class PickerDialog(QDialog):
    """Pick a main and a draft; `picked` holds the choice once accepted."""

    library_changed = Signal()
    sources_changed = Signal(object)  # Sources with a model folder the user just added
    drafts_changed = Signal()
    import_requested = Signal(str)  # a GGUF file found by the scan, to import
    measure_requested = Signal(str, str)  # main and draft folders to race in the arena
    copy_made = Signal(str, str)  # a 16-bit copy's folder, and the main to show once it is listed

    def __init__(
        self,
        sources: Sources,
        *,
        store: Store | None = None,
        usable_memory: int | None = None,
        endpoint: str | None = None,
        download_root: Path | None = None,
        settings: QSettings | None = None,
        loaded: tuple[str, str | None] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Choose models")
        self.loaded = loaded  # the pair loaded now: choosing another frees its memory
        self.device: DevicePrecision | None = None  # how weights are held here, once read
        self.sources, self.store, self.usable = sources, store, usable_memory
        self.settings = settings  # where the machines dialog keeps its choice; the app's when None
        self.facts: dict[str, ModelFacts] = {}
        self.verdicts: dict[str, list[tuple[ModelFacts, Verdict]]] = {}
        self.checking: dict[str, tuple[int, int]] = {}  # a main's drafts being checked: (done, total)
        self.picked: PickedPair | None = None
        self.background = BackgroundTasks(self, lambda exc: self.state_label.setText(f"Error: {exc}"))

        self.mains, self.main_model = QListView(), QStandardItemModel(self)
        self.drafts, self.draft_model = QListView(), QStandardItemModel(self)
        self.mains.setModel(self.main_model)
        self.drafts.setModel(self.draft_model)
        for view in (self.mains, self.drafts):
            view.setWordWrap(True)
            view.setSpacing(3)
            view.setEditTriggers(QListView.EditTrigger.NoEditTriggers)
        self.show_incompatible = QCheckBox("Show incompatible drafts")
        self.context = QSpinBox(minimum=512, maximum=1_048_576, singleStep=1024, value=4096, suffix=" tokens")
        self.fit_label, self.state_label = QLabel(""), QLabel("Scanning models…")
        self.fit_label.setWordWrap(True)
        self.use_button = QPushButton("Use this pair")
        self.machines_button = QPushButton("Run the main model across machines…")
        self.machines_button.setToolTip(
            f"Split a main model too large for {this_machine()} across several {machines()}"
        )
        self.machines_button.setAutoDefault(False)  # Enter keeps choosing the pair
        self.import_button = QPushButton("Import GGUF…")
        self.import_button.setToolTip("Convert a GGUF file found in your model folders to MLX")
        self.import_button.setVisible(False)
        self.ggufs: list[str] = []
        self.recommended = self._recommended_box()
        self.downloads = DownloadPanel(endpoint, download_root, self)
        self.suggestions = DraftSuggestions(
            self.drafts, lambda r: self.downloads.enqueue([r]), self._measure, human_bytes
        )
        self.main_precision = PrecisionNotice(self.background, lambda: self.facts.values())
        self.draft_precision = PrecisionNotice(self.background, lambda: self.facts.values())
        self.prefer_main: str | None = None  # a copy just made, to select once it is listed
        self.prefer_draft: str | None = None

        columns = QHBoxLayout()
        for title, view, notice, extra in (
            ("Main model", self.mains, self.main_precision, None),
            ("Draft", self.drafts, self.draft_precision, self.show_incompatible),
        ):
            box = QVBoxLayout()
            box.addWidget(QLabel(f"<b>{title}</b>"))
            box.addWidget(view)
            box.addWidget(notice)
            if extra is not None:
                box.addWidget(extra)
                box.addWidget(self.suggestions)
            columns.addLayout(box, 1)
        bottom = QHBoxLayout()
        bottom.addWidget(QLabel("Context length"))
        bottom.addWidget(self.context)
        bottom.addWidget(self.fit_label, 1)
        bottom.addWidget(self.machines_button)
        bottom.addWidget(self.use_button)
        top = QHBoxLayout()
        top.addWidget(self.state_label, 1)
        top.addWidget(self.import_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(columns, 1)
        layout.addLayout(bottom)
        layout.addWidget(self.recommended)
        layout.addWidget(self.downloads)

        self.mains.selectionModel().currentChanged.connect(lambda *_: self._on_main_changed())
        self.drafts.selectionModel().currentChanged.connect(lambda *_: self._update_fit())
        self.drafts.selectionModel().currentChanged.connect(
            lambda *_: self.draft_precision.show_for(self.facts.get(self.current_draft_key() or ""))
        )
        self.main_precision.made.connect(lambda folder: self._copy_made(folder, as_main=True))
        self.draft_precision.made.connect(lambda folder: self._copy_made(folder, as_main=False))
        self.background.run(this_device, self._on_device)
        self.show_incompatible.toggled.connect(lambda *_: self._fill_drafts())
        self.context.valueChanged.connect(lambda *_: self._update_fit())
        self.use_button.clicked.connect(self._on_use)
        self.machines_button.clicked.connect(self.open_machines)
        self.import_button.clicked.connect(self._offer_import)
        self.downloads.downloaded.connect(lambda *_: self.refresh())
        self.empty_note = EmptyLibrary(
            self.mains, self.background, lambda: self.settings or app_settings(), lambda: self.sources
        )
        self.empty_note.download.connect(self._show_recommended)
        self.empty_note.import_file.connect(self.import_requested)
        self.empty_note.folder_added.connect(self._use_sources)
        self.empty_note.failed.connect(lambda text: show_error_dialog(self, "No model found", text))
        self.refresh()

    def _offer_import(self) -> None:
        from PySide6.QtWidgets import QInputDialog

        path, ok = QInputDialog.getItem(
            self, "Import a GGUF model", "GGUF files found:", self.ggufs, 0, False
        )
        if ok and path:
            self.import_requested.emit(path)

    # -- background work -------------------------------------------------------------------
    def refresh(self) -> None:
        sources, store = self.sources, self.store
        self.background.run(lambda: scan_library(sources, store), self._on_scanned)

    def _on_scanned(self, result: tuple[list[ModelFacts], list[Found]]) -> None:
        facts, ggufs = result
        self.facts = {f.path: f for f in facts}
        self.verdicts.clear()
        self.checking.clear()
        fill_mains(self.main_model, facts, describe)
        usable = [f for f in facts if f.usable]
        self.ggufs = sorted(str(g.path) for g in ggufs)
        self.import_button.setVisible(bool(self.ggufs))
        gguf_note = f" · {len(ggufs)} GGUF file(s) can be imported" if ggufs else ""
        self.state_label.setText(f"{len(usable)} model(s) found{gguf_note}")
        self.recommended.setVisible(not usable)
        self.empty_note.setVisible(not facts)
        if self.prefer_main and select_path(self.mains, self.main_model, self.prefer_main):
            self.prefer_main = None
        elif usable:
            self.mains.setCurrentIndex(self.main_model.index(0, 0))
        self._fill_drafts()
        self.library_changed.emit()

    def current_main(self) -> ModelFacts | None:
        path = self.mains.currentIndex().data(KEY)
        return self.facts.get(path) if path else None

    def _on_main_changed(self) -> None:
        main = self.current_main()
        self.main_precision.show_for(main)
        if main is not None and main.path not in self.verdicts and main.path not in self.checking:
            self._check_drafts(main)
        self._fill_drafts()

    def _check_drafts(self, main: ModelFacts) -> None:
        """Off the GUI thread; the draft list counts the checks down as they come back."""
        library, store = list(self.facts.values()), self.store
        self.checking[main.path] = (0, len(draft_candidates(main, library)))

        def check(job: Job[tuple[str, int]]) -> tuple[str, list[tuple[ModelFacts, Verdict]]]:
            return main.path, check_drafts(main, library, store, lambda n: job.report((main.path, n)))

        self.background.start(check, self._on_verdicts, progress=self._on_checked)

    def _on_checked(self, progress: tuple[str, int]) -> None:
        path, done = progress
        if path not in self.checking:
            return
        total = self.checking[path][1]
        self.checking[path] = (done, total)
        main = self.current_main()
        row = self.draft_model.item(2) if self.draft_model.rowCount() > 2 else None
        if main is not None and main.path == path and row is not None and row.data(KEY) is None:
            row.setText(checking_text(total, done))

    def _on_verdicts(self, result: tuple[str, list[tuple[ModelFacts, Verdict]]]) -> None:
        path, verdicts = result
        self.verdicts[path] = verdicts
        self.checking.pop(path, None)
        main = self.current_main()
        if main is not None and main.path == path:
            self._fill_drafts()

    # -- drafts and memory -----------------------------------------------------------------
    def _fill_drafts(self) -> None:
        self.draft_model.clear()
        main = self.current_main()
        arena = {r.candidate: arena_note(r) for r in load_results(main.path)} if main is not None else {}
        for key, text in ((PLAIN, "No draft (plain decoding)"), (LOOKUP, "Prompt lookup (no model)")):
            item = QStandardItem(text + (f"\n{arena[key]}" if key in arena else ""))
            item.setData(key, KEY)
            self.draft_model.appendRow(item)
        hidden, compatible = "", 0
        if main is not None:
            hidden, compatible = fill_draft_rows(
                self.draft_model,
                main,
                self.verdicts.get(main.path, []),
                show_hidden=self.show_incompatible.isChecked(),
                arena=arena,
                describe=describe,
            )
        self.show_incompatible.setText(hidden)
        self.show_incompatible.setVisible(bool(hidden))
        pending = main is not None and main.path not in self.verdicts
        self.use_button.setEnabled(main is not None)
        if main is not None and pending:
            done, total = self.checking.get(main.path, (0, 0))
            self.draft_model.appendRow(checking_row(total, done))
        self.suggestions.show_for(main, compatible, not pending)
        self.drafts.setCurrentIndex(self.draft_model.index(2 if compatible else 0, 0))
        if self.prefer_draft and select_path(self.drafts, self.draft_model, self.prefer_draft):
            self.prefer_draft = None
        self._update_fit()
        self.drafts_changed.emit()

    def _on_device(self, device: DevicePrecision) -> None:
        self.device = device
        for notice in (self.main_precision, self.draft_precision):
            notice.set_device(device)
        self._update_fit()

    def _copy_made(self, folder: str, as_main: bool) -> None:
        """A 16-bit copy is in the library: list it, chosen where its original was."""
        main = self.current_main()
        if as_main or main is None:
            self.prefer_main = folder
        else:
            self.prefer_main, self.prefer_draft = main.path, folder
        self.copy_made.emit(folder, self.prefer_main)
        self.refresh()

    def _measure(self) -> None:
        if (main := self.current_main()) is not None and (key := self.current_draft_key()):
            self.measure_requested.emit(main.path, key)

    def current_draft_key(self) -> str | None:
        key = self.drafts.currentIndex().data(KEY)
        return str(key) if key else None

    def drafts_checked(self) -> bool:
        """Whether the current main's compatibility checks have come back."""
        main = self.current_main()
        return main is not None and main.path in self.verdicts

    def _fit(self) -> MemoryFit | None:
        main = self.current_main()
        if main is None:
            return None
        draft = self.facts.get(self.current_draft_key() or "")
        widened = self.device is not None and self.device.unquantized_dtype == "float32"
        main_now, draft_now = self.loaded or ("", None)
        loaded = (self.facts.get(main_now), self.facts.get(draft_now or ""))
        return memory_fit(main, draft, self.context.value(), self.usable, widened=widened, loaded=loaded)

    def _update_fit(self) -> None:
        fit = self._fit()
        if fit is not None:
            self.fit_label.setText(("" if fit.fits else "⚠ Won't fit: ") + fit.explain())

    def _on_use(self) -> None:
        main, fit, key = self.current_main(), self._fit(), self.current_draft_key()
        if main is None or fit is None:
            return
        if not fit.fits:
            answer = QMessageBox.question(
                self,
                "Not enough memory",
                f"This pair needs more memory than this machine can give it:\n\n{fit.explain()}\n\nLoad it anyway?",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                QMessageBox.StandardButton.No,
            )
            if answer != QMessageBox.StandardButton.Yes:
                return
        mode = key if key in (PLAIN, LOOKUP) else "model"
        self.picked = PickedPair(main.path, key if mode == "model" else None, mode, self.context.value())
        self.accept()

    def open_machines(self) -> HostsDialog:
        """The machines dialog, for the selected main and draft; modal, like the picker."""
        main = self.current_main()
        draft = self.facts.get(self.current_draft_key() or "")
        settings = self.settings if self.settings is not None else app_settings()
        dialog = HostsDialog(settings, main, draft, self.context.value(), parent=self)
        dialog.resize(900, 640)
        dialog.open()
        return dialog

    def _show_recommended(self) -> None:
        self.recommended.show()
        self.recommended.findChildren(QPushButton)[0].setFocus()

    def _use_sources(self, sources: Sources) -> None:
        self.sources = sources
        self.sources_changed.emit(sources)
        self.refresh()

    def _recommended_box(self) -> QGroupBox:
        box = QGroupBox("Recommended pairs to start with")
        layout = QVBoxLayout(box)
        for pair in recommended_pairs():
            row = QHBoxLayout()
            row.addWidget(QLabel(f"<b>{pair.title}</b> — {pair.main_repo} + {pair.draft_repo}"), 1)
            button = QPushButton(f"Download (about {human_bytes(pair.download_bytes)})")
            button.clicked.connect(
                lambda _=False, p=pair: self.downloads.enqueue([p.main_repo, p.draft_repo])
            )
            row.addWidget(button)
            layout.addLayout(row)
        return box
