"""A model that has just arrived in the library, by an import or a download, becomes the main
model: selected in the picker when one is open, loaded (without a draft) otherwise. The picker
also opens with the loaded main selected, so what the user chose last is what they see."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject

from app.engine.library.download import destination
from app.engine.library.recommended import ALL_RECOMMENDED
from app.ui.picker.picker import KEY, PickerDialog


def same_path(a: object, b: str | None) -> bool:
    return bool(a) and b is not None and Path(str(a)).resolve() == Path(b).resolve()


def select_main(dialog: PickerDialog, path: str | None) -> bool:
    """Make `path` the current main in `dialog`, if it is listed there and usable."""
    model = dialog.main_model
    for row in range(model.rowCount()):
        item = model.item(row)
        if item.isEnabled() and same_path(item.data(KEY), path):
            dialog.mains.setCurrentIndex(model.index(row, 0))
            return True
    return False


def recommended_draft(folder: str, root: Path | None) -> bool:
    """A draft downloaded with its recommended pair's main is no main itself."""
    return any(same_path(destination(p.draft_repo, root), folder) for p in ALL_RECOMMENDED)


class NewModels(QObject):
    def __init__(
        self,
        load: Callable[[str, str | None, str], None],
        loaded: Callable[[], tuple[str, str | None] | None],
        parent: QObject | None = None,
    ):
        super().__init__(parent)
        self.load, self.loaded = load, loaded
        self.dialog: PickerDialog | None = None
        self.prefer: str | None = None

    def follow(self, dialog: PickerDialog, main: str | None) -> None:
        """Keep `main` selected in `dialog` across its rescans, until a new model replaces it."""
        self.dialog, self.prefer = dialog, main
        dialog.library_changed.connect(lambda: select_main(dialog, self.prefer))
        dialog.downloads.downloaded.connect(lambda folder: self._downloaded(dialog, folder))
        dialog.copy_made.connect(lambda _copy, main: setattr(self, "prefer", main))

    def _downloaded(self, dialog: PickerDialog, folder: str) -> None:
        # The picker rescans on the same signal; its result comes back later, to this preference.
        if not recommended_draft(folder, dialog.downloads.root):
            self.prefer = folder

    def arrived(self, path: str) -> None:
        """An import finished (or found the file already imported): show it as the main."""
        dialog = self.dialog
        if dialog is not None and dialog.isVisible():
            self.prefer = path
            dialog.refresh()
        elif not same_path((self.loaded() or ("", None))[0], path):  # already the main: keep its draft
            self.load(path, None, "plain")
