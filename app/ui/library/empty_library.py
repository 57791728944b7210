"""What the picker's main list says while it is empty: the three ways to get a model, each a link
that does it, so an empty list is never a dead end.

"Download one" points at the recommended pairs under the lists; "Import a GGUF file" asks for the
file; "Add a model folder" asks for a folder and keeps it only once a model is found in it
(app.ui.library.model_folders), walking it off the GUI thread.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QLabel, QListView, QVBoxLayout

from app.engine.library.discovery import Sources
from app.ui.common.background import BackgroundTasks
from app.ui.common.error_banner import reason
from app.ui.common.theme import current_theme
from app.ui.library import model_folders as folders

WORDS = "No models yet — Download one, Import a GGUF file, or Add a model folder"
LINKS = (
    "No models yet — <a href='download'>Download one</a>, <a href='import'>Import a GGUF file</a>, "
    "or <a href='folder'>Add a model folder</a>"
)


class EmptyLibrary(QLabel):
    """Laid over the list's viewport, so it shows where the models would be; hidden once any are."""

    download = Signal()  # show the recommended pairs to download
    import_file = Signal(str)  # a GGUF file the user chose
    folder_added = Signal(object)  # Sources that scan the folder just added
    failed = Signal(str)  # a folder with no model in it, in words

    def __init__(
        self,
        view: QListView,
        background: BackgroundTasks,
        settings: Callable[[], QSettings],
        sources: Callable[[], Sources],
    ) -> None:
        super().__init__(LINKS)
        self.background, self.settings, self.sources = background, settings, sources
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.setStyleSheet(f"color: {current_theme().muted.name()}; padding: 12px;")
        self.linkActivated.connect(self.follow)
        layout = QVBoxLayout(view.viewport())
        layout.addWidget(self)
        self.hide()

    def follow(self, link: str) -> None:
        if link == "download":
            self.download.emit()
        elif link == "import":
            path, _ = QFileDialog.getOpenFileName(self, "Import a GGUF model", "", "GGUF models (*.gguf)")
            if path:
                self.import_file.emit(path)
        elif link == "folder" and (folder := folders.ask_for_folder(self)):
            self.background.start(
                lambda _job: folders.holds_models(folder),
                lambda found: self._checked(folder, found),
                failed=lambda exc: self.failed.emit(f"Could not read {folder}: {reason(exc)}."),
            )

    def _checked(self, folder: str, found: bool) -> None:
        if not found:
            self.failed.emit(folders.no_model_found(folder))
            return
        self.folder_added.emit(folders.keep_folder(self.settings(), self.sources(), folder))
