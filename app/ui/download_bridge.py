"""Hub downloads on a pool thread, reported to the UI through Qt signals.

The engine's `download` drives huggingface_hub with its own tqdm look-alike; this bridge hands it
a progress callback that emits a signal, so Qt queues each report onto the UI thread.
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, QRunnable, Signal

from app.engine.library.download import DownloadCancelled, DownloadError, download
from app.engine.library.safety import UnsafeModel


class DownloadSignals(QObject):
    progress = Signal(object)  # DownloadProgress
    finished = Signal(str)  # the model folder
    failed = Signal(str)  # a sentence for the user
    cancelled = Signal()


class DownloadTask(QRunnable):
    """One repo download; `cancel()` may be called from the UI thread at any time."""

    def __init__(self, repo_id: str, endpoint: str | None = None, root: Path | None = None) -> None:
        super().__init__()
        self.repo_id, self.endpoint, self.root = repo_id, endpoint, root
        self.signals = DownloadSignals()
        self._cancel = threading.Event()
        self.setAutoDelete(False)  # the panel keeps a reference until a final signal arrives

    def cancel(self) -> None:
        self._cancel.set()

    def run(self) -> None:
        try:
            folder = download(
                self.repo_id,
                progress=self.signals.progress.emit,
                cancel=self._cancel,
                endpoint=self.endpoint,
                root=self.root,
            )
        except DownloadCancelled:
            self.signals.cancelled.emit()
        except (DownloadError, UnsafeModel) as exc:
            self.signals.failed.emit(str(exc))
        except Exception as exc:  # anything else still ends the task visibly
            self.signals.failed.emit(f"downloading {self.repo_id} failed: {exc}")
        else:
            self.signals.finished.emit(str(folder))
