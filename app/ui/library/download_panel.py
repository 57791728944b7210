"""Downloading models from the picker: a queue of repos, one at a time, with progress and Cancel."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.library.download import DownloadCancelled, DownloadError, DownloadProgress, download
from app.engine.library.safety import UnsafeModel
from app.ui.common.background import BackgroundTasks, Job
from app.ui.common.wait_progress import WaitPanel


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


class DownloadPanel(QGroupBox):
    """Repo id, progress bar with size and speed, cancel; downloads queue one after another."""

    downloaded = Signal(str)
    failed = Signal(str)  # why a download stopped, for a message that outlives this dialog

    def __init__(self, endpoint: str | None, root: Path | None, parent: QWidget | None = None):
        super().__init__("Download from Hugging Face", parent)
        self.endpoint, self.root = endpoint, root
        self.background = BackgroundTasks(self, self._failed)
        self.current = ""
        self.task: Job[DownloadProgress] | None = None
        self.queue: list[str] = []
        self.repo = QLineEdit(placeholderText="owner/name, e.g. mlx-community/Qwen2.5-0.5B-Instruct-4bit")
        self.start_button, self.cancel_button = QPushButton("Download"), QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.bar, self.status, self.waits = QProgressBar(), QLabel(""), WaitPanel()
        self.bar.setRange(0, 1000)
        row = QHBoxLayout()
        for w in (self.repo, self.start_button, self.cancel_button):
            row.addWidget(w)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        for part in (self.bar, self.status, self.waits):  # waits: time so far and left
            layout.addWidget(part)
        self.start_button.clicked.connect(lambda: self.enqueue([self.repo.text().strip()]))
        self.cancel_button.clicked.connect(self.cancel)

    def enqueue(self, repo_ids: list[str]) -> None:
        self.queue += [r for r in repo_ids if r]
        if self.task is None:
            self._next()

    def _next(self) -> None:
        self.waits.end(self.current)
        if not self.queue:
            self.task = None
            self.cancel_button.setEnabled(False)
            return
        repo_id, endpoint, root = self.queue.pop(0), self.endpoint, self.root
        self.current = repo_id

        def fetch(job: Job[DownloadProgress]) -> str | None:
            """The folder, or None when cancelled; hub and safety refusals raise for `_stop`."""
            try:
                return str(
                    download(repo_id, progress=job.report, cancel=job.cancelled, endpoint=endpoint, root=root)
                )
            except DownloadCancelled:
                return None
            except (DownloadError, UnsafeModel):
                raise
            except Exception as exc:  # anything else still ends the download visibly
                raise DownloadError(f"downloading {repo_id} failed: {exc}") from exc

        self.status.setText(f"Starting {repo_id}…")
        self.waits.begin(repo_id, f"Downloading {repo_id}", memory="")
        self.bar.setValue(0)
        self.cancel_button.setEnabled(True)
        self.task = self.background.start(
            fetch,
            lambda folder: (
                self._on_finished(folder)
                if folder is not None
                else self._stop(f"Cancelled {repo_id}; nothing was installed")
            ),
            progress=self.show_progress,
        )

    def cancel(self) -> None:
        self.queue.clear()
        if self.task is not None:
            self.task.cancel()

    def show_progress(self, p: DownloadProgress) -> None:
        """A progress report in the bar, waits and status line; public so a test can watch each one."""
        self.bar.setValue(int(1000 * p.done_bytes / p.total_bytes) if p.total_bytes else 0)
        self.waits.progress(p.repo_id, p.done_bytes, p.total_bytes, f"{p.phase.title()} {p.repo_id}")
        sizes = f"{human_bytes(p.done_bytes)} of {human_bytes(p.total_bytes)}"
        if p.phase == "waiting":
            self.status.setText(f"{p.repo_id}: waiting for the download of it already under way…")
        elif p.phase == "checking":
            self.status.setText(f"{p.repo_id}: Checking files… {sizes}")
        else:
            self.status.setText(f"{p.repo_id}: {sizes} · {human_bytes(p.bytes_per_second)}/s")

    def _on_finished(self, folder: str) -> None:
        self.bar.setValue(1000)
        self.status.setText(f"Downloaded to {folder}")
        self.downloaded.emit(folder)
        self._next()

    def _failed(self, exc: Exception) -> None:
        text = str(exc) if self.current in str(exc) else f"{self.current}: {exc}"
        self._stop(f"Failed: {text}")
        self.failed.emit(f"Download failed: {text}")

    def _stop(self, message: str) -> None:
        self.status.setText(message)
        self.queue.clear()
        self._next()
