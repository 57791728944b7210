"""Under a model list in the picker: a quantized model chosen where MLX computes on the CPU gets
a warning in plain words, with one click to make a 16-bit copy of it.

MLX's CPU build has no fast kernels for quantized models (app/engine/library/precision.py), so
a 4-bit model there writes under a word a second. The copy (app/engine/library/
unquantized_copy.py) runs in a child process as a background job, with its progress and a
Cancel button here; once done, `made` gives the picker its folder to list and select.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QHBoxLayout, QLabel, QListView, QProgressBar, QPushButton, QVBoxLayout, QWidget

from app.engine.library.compat import same_model_other_precision
from app.engine.library.facts import ModelFacts
from app.engine.library.precision import UNQUANTIZED, DevicePrecision, slow_model_warning
from app.ui.common.background import BackgroundTasks, Job
from app.ui.library.download_panel import human_bytes

KEY = Qt.ItemDataRole.UserRole


def is_quantized(facts: ModelFacts | None) -> bool:
    return facts is not None and facts.usable and facts.bits is not None and facts.bits < UNQUANTIZED


def unquantized_twin(model: ModelFacts, library: Iterable[ModelFacts]) -> ModelFacts | None:
    """A usable copy of `model` in the library at 16 bits or wider, if there is one."""
    for other in library:
        if other.usable and not is_quantized(other) and same_model_other_precision(model, other):
            return other
    return None


def select_path(view: QListView, model: QStandardItemModel, path: str) -> bool:
    """Make the enabled row holding the folder `path` current; whether one was found."""
    want = Path(path).resolve()
    for row in range(model.rowCount()):
        item = model.item(row)
        key = item.data(KEY)
        if item.isEnabled() and key and Path(str(key)).resolve() == want:
            view.setCurrentIndex(model.index(row, 0))
            return True
    return False


class PrecisionNotice(QWidget):
    """The warning and the copy button for the model `show_for` was given last."""

    made = Signal(str)  # the 16-bit copy's folder, complete and in the models folder

    def __init__(
        self,
        background: BackgroundTasks,
        library: Callable[[], Iterable[ModelFacts]] = tuple,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.background, self.library = background, library  # the models the picker lists
        self.device: DevicePrecision | None = None  # unknown until the engine has said
        self.model: ModelFacts | None = None
        self.job: Job[object] | None = None
        self.status = ""  # the copy under way, or why the last one failed
        self.text = QLabel("")
        self.text.setWordWrap(True)
        self.copy_button = QPushButton(f"Make a {UNQUANTIZED}-bit copy")
        self.copy_button.setAutoDefault(False)  # Enter keeps choosing the pair
        self.copy_button.clicked.connect(self.make_copy)
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setAutoDefault(False)
        self.cancel_button.clicked.connect(self.cancel)
        row = QHBoxLayout()
        row.addWidget(self.progress, 1)
        row.addWidget(self.cancel_button)
        row.addWidget(self.copy_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.text)
        layout.addLayout(row)
        self._redraw()

    def set_device(self, device: DevicePrecision) -> None:
        self.device = device
        self._redraw()

    def show_for(self, facts: ModelFacts | None) -> None:
        """The model now chosen in the list this notice sits under (None: none, or no model)."""
        if self.job is None and (facts is None or self.model is None or facts.path != self.model.path):
            self.status = ""  # the last copy's failure was about another model
        self.model = facts
        self._redraw()

    def warns(self) -> bool:
        return self.device is not None and self.device.quantized_slow and is_quantized(self.model)

    def twin(self) -> ModelFacts | None:
        """The chosen model's unquantized copy already in the library, used instead of a new one."""
        return unquantized_twin(self.model, self.library()) if self.model is not None else None

    def _redraw(self) -> None:
        copying = self.job is not None
        self.progress.setVisible(copying)
        self.cancel_button.setVisible(copying)
        self.copy_button.setVisible(not copying and self.warns())
        lines = [self.status] if self.status else []
        if self.warns() and not copying:
            assert self.model is not None and self.model.bits is not None and self.device is not None
            warning = slow_model_warning(self.model.bits)
            twin = self.twin()
            if twin is not None:
                self.copy_button.setText(f"Use {twin.name}")
                lines.insert(0, f"⚠ {warning} Your library already has it unquantized: {twin.name}.")
            else:
                self.copy_button.setText(f"Make a {UNQUANTIZED}-bit copy")
                size = self.device.copy_bytes(self.model.params)
                room = f" It takes about {human_bytes(size)} of disk." if size else ""
                lines.insert(0, f"⚠ {warning} A {UNQUANTIZED}-bit copy runs much faster.{room}")
        self.text.setText("\n".join(lines))
        self.setVisible(bool(lines))

    def make_copy(self) -> None:
        """Copy the chosen model in the background; its progress shows here until it ends."""
        from app.engine.library.dequantize import CopyFailed, CopyFinished, CopyProgress
        from app.engine.library.unquantized_copy import make_copy

        model = self.model
        if model is None or self.job is not None:
            return
        twin = self.twin()
        if twin is not None:  # a second copy of a model the library holds unquantized wastes gigabytes
            self.made.emit(twin.path)
            return
        source, label = model.path, model.name

        def work(job: Job[object]) -> None:
            for event in make_copy(source, label, cancel=job.cancelled):
                job.report(event)

        def progress(event: object) -> None:
            if isinstance(event, CopyProgress) and event.total:
                self.progress.setValue(event.done * 100 // event.total)
            elif isinstance(event, CopyFinished):
                self._ended()
                self.made.emit(event.path)
            elif isinstance(event, CopyFailed):
                self._ended("" if event.kind == "cancelled" else f"Could not make the copy: {event.message}")

        def failed(exc: Exception) -> None:
            self._ended(f"Could not make the copy: {exc}")

        self.progress.setRange(0, 100)
        self.progress.setValue(0)
        self.job = self.background.start(work, lambda _: None, progress=progress, failed=failed)
        self.status = f"Making a {UNQUANTIZED}-bit copy of {label}…"
        self._redraw()

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()

    def _ended(self, status: str = "") -> None:
        self.job, self.status = None, status
        self._redraw()
