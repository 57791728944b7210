"""The models the window offers: the folders it looks in, their scans, a folder added, a GGUF imported.

Scans and imports run off the GUI thread on the window's background tasks, so closing the window
cancels them with its other jobs. Whoever shows models (the window's panes, the server's model
list) follows `scanned`; the window decides what to show, this object only what there is.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QSettings, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

from app.engine.library.discovery import Sources, default_sources, scan_library
from app.ui.common.background import BackgroundTasks
from app.ui.common.error_banner import reason
from app.ui.common.wait_progress import WaitPanel
from app.ui.library import model_folders as folders
from app.ui.library.gguf_import import start_import


class ModelLibrary(QObject):
    scanned = Signal(object)  # each scan's outcome: (models, ggufs) or the exception
    status = Signal(str, int)  # a line for the status bar, and how long to show it (ms; 0 = until replaced)
    import_status = Signal(str)  # where an import stands, for the welcome panel too
    imported = Signal(str)  # the folder of a model that has just arrived
    failed = Signal(str, str)  # a sentence for the error banner, and details behind it ("" if none)

    def __init__(
        self,
        settings: QSettings,
        background: BackgroundTasks,
        waits: WaitPanel,
        parent: QWidget,
        sources: Sources | None = None,
    ) -> None:
        super().__init__(parent)
        self.settings, self.background, self.waits, self.window = settings, background, waits, parent
        self.sources = sources or default_sources(tuple(Path(p) for p in folders.saved_folders(settings)))
        self.has_models = False  # known after the first scan

    def scan(self) -> None:
        sources = self.sources
        self.background.run(lambda: scan_library(sources, None), self._on_scanned, failed=self._on_scanned)

    def _on_scanned(self, result: Any) -> None:
        if isinstance(result, Exception):
            self.failed.emit(f"Could not scan the model folders: {result}", "")
        else:
            self.has_models = any(f.usable for f in result[0])
        self.scanned.emit(result)

    def add_folder(self) -> None:
        """Kept only once a model is found in it; otherwise the banner says what a model folder holds."""
        folder = folders.ask_for_folder(self.window)
        if folder:
            checked = partial(self._folder_checked, folder)  # gets the answer, or the error reading it
            self.background.run(lambda: folders.holds_models(folder), checked, failed=checked)

    def _folder_checked(self, folder: str, found: object) -> None:
        if isinstance(found, Exception):
            self.failed.emit(f"Could not read {folder}: {reason(found)}.", "")
        elif not found:
            self.failed.emit(folders.no_model_found(folder), "")
        else:
            self.sources = folders.keep_folder(self.settings, self.sources, folder)
            self.status.emit(f"Added {folder}", 8000)
            self.scan()

    def use_sources(self, sources: Sources) -> None:
        """A model folder added from the picker is scanned here too."""
        self.sources = sources
        self.scan()

    def import_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Import a GGUF model", "", "GGUF models (*.gguf)")
        if path:
            self.start_import(path)

    def start_import(self, path: str) -> None:
        start_import(
            self.background,
            path,
            self._show_import,
            self.scan,
            self.failed.emit,
            self.waits,
            self.imported.emit,
        )

    def _show_import(self, text: str) -> None:
        self.import_status.emit(text)
        self.status.emit(text, 0 if text.startswith("Importing") else 15000)
