"""A process that used the engine worker exits cleanly: no abort from MLX's per-thread objects."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from app.engine.thread_exit import wait_until_gone
from tests.conftest import ToyModels

SCRIPT = textwrap.dedent(
    """
    import sys, threading
    from app.engine.blas import ensure_blas
    ensure_blas()
    from app.engine.protocol import LoadPair, PairLoaded
    from app.engine.worker import remembering_worker
    from app.server.config import ServerConfig
    from app.server.records import ModelsInfo
    from app.server.runner import ServerRunner

    loaded = threading.Event()
    worker = remembering_worker(lambda m: loaded.set() if isinstance(m.event, PairLoaded) else None)
    worker.start()
    worker.submit(LoadPair(sys.argv[1], sys.argv[2]))
    assert loaded.wait(120), "the pair did not load"
    server = ServerRunner(ServerConfig(port=0), worker, lambda: ModelsInfo(sys.argv[1]))
    server.start()
    server.stop()
    assert worker.shutdown(10)
    print("clean")
    """
)


def test_a_process_that_loaded_a_pair_and_served_exits_with_status_0(toy_models: ToyModels, tmp_path) -> None:
    env = dict(os.environ, SPECCHAT_HOME=str(tmp_path))
    for _ in range(2):  # the abort came from a race at exit: give it two chances to show
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(toy_models.main), str(toy_models.draft)],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
        assert "terminate called" not in result.stderr, result.stderr
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "clean"


def test_a_joined_thread_is_gone_from_the_process_once_waited_for() -> None:
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
    assert wait_until_gone(thread)
    if sys.platform.startswith("linux"):
        assert not Path(f"/proc/self/task/{thread.native_id}").exists()


def test_a_running_thread_is_not_waited_for() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not wait_until_gone(thread)
    finally:
        stop.set()
        thread.join()
