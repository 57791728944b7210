"""One `python -m app serve` process over the toy pair for the module that needs a real server
(each start loads the pair); in-process tests build a `ServerRunner` of their own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.engine.measure.toy import ToyModels

ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 120


@dataclass(frozen=True)
class Served:
    url: str  # ends in /v1
    port: int
    process: subprocess.Popen[str]
    toy: ToyModels

    @property
    def root(self) -> str:
        return self.url.removesuffix("/v1")


def cli_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1")


@pytest.fixture(scope="module")
def served(toy_models: ToyModels) -> Iterator[Served]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app",
            "serve",
            "--main",
            str(toy_models.main),
            "--draft",
            str(toy_models.draft),
        ]
        + ["--port", "0", "--no-library"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        cwd=ROOT,
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # "serving main (+ draft) at http://127.0.0.1:PORT/v1"
    if " at http" not in line:
        process.kill()
        pytest.fail(f"the server did not start: {line}{process.stderr.read() if process.stderr else ''}")
    url = line.rsplit(" at ", 1)[1].strip()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    try:
        yield Served(url, port, process, toy_models)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
