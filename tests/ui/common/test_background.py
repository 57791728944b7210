"""Background tasks: blocking work off the GUI thread, everything it reports back on it."""

from __future__ import annotations

import asyncio
import threading

from PySide6.QtCore import QObject

from app.ui.common.background import BackgroundTasks, Job


def make_tasks(qtbot, errors: list[Exception] | None = None) -> tuple[QObject, BackgroundTasks]:
    owner = QObject()
    sink = errors if errors is not None else []
    return owner, BackgroundTasks(owner, sink.append)


def test_progress_then_result_arrive_in_order_on_the_gui_thread(qtbot):
    owner, tasks = make_tasks(qtbot)
    gui, seen = threading.current_thread(), []

    def count(job: Job[int]) -> str:
        worker = threading.current_thread()
        for i in range(50):
            job.report(i)
        return "done" if worker is not gui else "ran on the GUI thread"

    tasks.start(
        count,
        lambda result: seen.append((result, threading.current_thread() is gui)),
        progress=lambda i: seen.append((i, threading.current_thread() is gui)),
    )
    assert tasks.jobs  # held until it ends: the loop itself keeps only weak references
    qtbot.waitUntil(lambda: len(seen) == 51, timeout=5000)
    assert seen == [(i, True) for i in range(50)] + [("done", True)]
    qtbot.waitUntil(lambda: not tasks.jobs, timeout=5000)


def test_an_exception_goes_to_the_failure_handler(qtbot):
    errors: list[Exception] = []
    owner, tasks = make_tasks(qtbot, errors)
    results: list[object] = []
    tasks.run(lambda: 1 / 0, results.append)
    qtbot.waitUntil(lambda: errors != [], timeout=5000)
    assert isinstance(errors[0], ZeroDivisionError), (
        "a failing task reaches the failure handler with its error"
    )
    assert results == [], "a failing task delivers no result"
    own: list[Exception] = []
    tasks.start(lambda job: [][1], results.append, failed=own.append)
    qtbot.waitUntil(lambda: own != [], timeout=5000)
    assert isinstance(own[0], IndexError), "a task's own failure handler gets its error"
    assert len(errors) == 1, "the shared failure handler is not called for it"


def test_cancel_reaches_the_work_and_its_outcome_still_arrives(qtbot):
    owner, tasks = make_tasks(qtbot)
    started, results = threading.Event(), []

    def wait_for_cancel(job: Job[None]) -> str:
        started.set()
        return "stopped" if job.cancelled.wait(5) else "never cancelled"

    job = tasks.start(wait_for_cancel, results.append)
    assert started.wait(5)
    job.cancel()
    qtbot.waitUntil(lambda: results != [], timeout=5000)
    assert results == ["stopped"]


def test_nothing_reaches_an_owner_that_is_gone(qtbot):
    owner, tasks = make_tasks(qtbot)
    release, finished, seen, marker = threading.Event(), threading.Event(), [], []

    def slow(job: Job[int]) -> int:
        release.wait(5)
        job.report(1)
        finished.set()
        return 2

    job = tasks.start(slow, seen.append, progress=seen.append)
    owner.deleteLater()
    qtbot.waitUntil(lambda: job.dropped, timeout=5000)
    release.set()
    assert finished.wait(5)
    # posted after the late report from another thread, so it runs after that report would have
    loop = asyncio.get_event_loop()
    threading.Thread(target=lambda: loop.call_soon_threadsafe(marker.append, "after")).start()
    qtbot.waitUntil(lambda: marker == ["after"], timeout=5000)
    assert job.cancelled.is_set(), "a task whose owner is gone is cancelled"
    assert seen == [], "nothing reaches an owner that is gone"
    assert not tasks.jobs, "a dropped task is forgotten"
