"""Background work for the UI: library scans, compatibility checks, downloads, GGUF imports and
tokenizer loads run as asyncio tasks on the qasync loop that drives the GUI thread.

The blocking part runs on a thread of a shared pool; its result, its exception and any progress it
reports come back as calls on the GUI thread, so handlers may touch widgets. The engine is not run
here: it keeps its own worker thread behind the EngineBridge.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from PySide6.QtCore import QCoreApplication, QObject, QTimer, Signal, Slot

T = TypeVar("T")
P = TypeVar("P")

# Python threads rather than qasync's default QThread executor: a script that pumps Qt events
# itself never closes its loop, and Qt aborts the process when a QThread outlives it.
_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="specchat-background")


def ensure_event_loop(app: QCoreApplication) -> asyncio.AbstractEventLoop:
    """The running loop, or qasync's attached to an application whose events something else
    pumps (pytest-qt, scripts that call processEvents): qasync's callbacks are Qt events, so tasks
    then run as those events are processed, just as under `loop.run_forever()`."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        pass
    import qasync

    loop: asyncio.AbstractEventLoop = qasync.QEventLoop(app, already_running=True)
    asyncio.set_event_loop(loop)
    return loop


class _Relay(QObject):
    """Carries progress to the GUI thread as queued Qt events. The loop's own
    `call_soon_threadsafe` would not do: qasync runs each callback on a zero-delay Qt timer, and
    under load those can fire out of order, letting the result overtake the last reports."""

    reported = Signal(object)

    def __init__(self, deliver: Callable[[Any], None]) -> None:
        super().__init__()
        self.deliver = deliver
        self.reported.connect(self.relay)

    @Slot(object)
    def relay(self, value: object) -> None:
        self.deliver(value)


class Job(Generic[P]):
    """What the blocking function is handed: `report` sends progress to the GUI thread and
    `cancelled` is set when the user gives up (the function decides where it can stop)."""

    def __init__(self, on_progress: Callable[[P], None] | None) -> None:
        self._on_progress = on_progress
        self._relay = _Relay(self._deliver)  # made on the GUI thread, so its slot runs there
        self.cancelled = threading.Event()
        self.dropped = False  # its owner is gone: nothing more may reach the GUI
        self.task: asyncio.Task[None] | None = None

    def report(self, value: P) -> None:
        """Callable from the worker thread. Reports are posted before the result is, and Qt
        handles one thread's posted events in order, so the GUI sees them all before the result."""
        if self._on_progress is not None:
            self._relay.reported.emit(value)

    def _deliver(self, value: P) -> None:
        if not self.dropped and self._on_progress is not None:
            self._on_progress(value)

    def cancel(self) -> None:
        """Ask the function to stop; whatever it then returns or raises is still delivered."""
        self.cancelled.set()

    def drop(self) -> None:
        """Cancel and deliver nothing more, for an owner that is going away."""
        self.cancel()
        self.dropped = True
        if self.task is not None:
            self.task.cancel()


class BackgroundTasks:
    """The jobs one window or dialog started. Holding them here keeps each task alive until it
    ends (the loop keeps only weak references), and the owner's destruction drops them, so no
    result arrives at a deleted widget."""

    def __init__(self, owner: QObject, failed: Callable[[Exception], None]) -> None:
        self.failed = failed
        self.jobs: set[Job[Any]] = set()
        owner.destroyed.connect(self.shutdown)

    def start(
        self,
        work: Callable[[Job[P]], T],
        done: Callable[[T], None],
        *,
        progress: Callable[[P], None] | None = None,
        failed: Callable[[Exception], None] | None = None,
    ) -> Job[P]:
        """Start `work(job)` off the GUI thread; `done(result)` or `failed(exception)` follows on it.

        A window is built before its event loop runs (`launch.run_gui`), so work asked for then
        starts on the loop's first turn instead of needing a loop that does not exist yet."""
        job: Job[P] = Job(progress)
        self.jobs.add(job)
        try:
            loop = asyncio.get_running_loop()  # the GUI thread's qasync loop
        except RuntimeError:
            QTimer.singleShot(0, job._relay, lambda: self._launch(job, work, done, failed))
            return job
        self._launch(job, work, done, failed, loop)
        return job

    def _launch(
        self,
        job: Job[P],
        work: Callable[[Job[P]], T],
        done: Callable[[T], None],
        failed: Callable[[Exception], None] | None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if job.dropped:  # its owner went away before the loop ever ran
            return
        loop = loop or asyncio.get_running_loop()
        on_error = failed or self.failed

        outcome = loop.run_in_executor(_POOL, work, job)  # starts now, not when the loop next turns
        # a dropped job's outcome is never awaited: read it anyway, so asyncio logs nothing
        outcome.add_done_callback(lambda f: f.cancelled() or f.exception())

        async def supervise() -> None:
            try:
                result = await outcome
            except Exception as exc:
                on_error(exc)
            else:
                done(result)

        job.task = loop.create_task(supervise())
        job.task.add_done_callback(lambda _task: self.jobs.discard(job))

    def run(
        self,
        fn: Callable[[], T],
        done: Callable[[T], None],
        *,
        failed: Callable[[Exception], None] | None = None,
    ) -> Job[None]:
        """`start` for a function that neither reports progress nor can be cancelled."""
        return self.start(lambda _job: fn(), done, failed=failed)

    def shutdown(self, *_: object) -> None:
        for job in list(self.jobs):
            job.drop()
        self.jobs.clear()
