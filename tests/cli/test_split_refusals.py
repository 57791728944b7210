"""`generate` and `bench` with `--ranks`/`--hostfile` refuse, in one line and before any rank
starts, what the one-process path refuses and what splitting cannot do: a permuted-vocabulary
draft, a main too large for memory, more ranks than the machine or the model allows, a huge or
deeply nested machine list, and machine names ssh could misread."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.measure.toy import ToyModels
from tests.engine.distributed.oversized import write_oversized_main

ROOT = Path(__file__).resolve().parents[2]
QUICK = 2.0  # CPU seconds a refusal of the count or the list may take, Python's start included


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(home: Path, *argv: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], float]:
    """The command's result and the CPU seconds it took: its own work, which other programs on a
    busy machine do not lengthen as they do its wall time."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPECCHAT_HOME=str(home))
    started = _cpu_of_children()
    done = subprocess.run(
        [sys.executable, "-m", "app", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )
    return done, _cpu_of_children() - started


def _refused(done: subprocess.CompletedProcess[str], words: str) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "ranks]" not in done.stderr  # no rank was started
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and words in line, line
    return line


def _quickly(home: Path, argv: list[str], words: str) -> None:
    """Refused within QUICK CPU seconds: before the model is read or a rank is started."""
    done, seconds = _run(home, *argv, timeout=60)
    _refused(done, words)
    assert seconds < QUICK, f"refused after {seconds:.2f} CPU seconds, not under {QUICK}"


def test_ranks_999_are_refused_in_under_two_seconds(toy_models: ToyModels, tmp_path: Path) -> None:
    argv = ["generate", "--main", str(toy_models.main), "--ranks", "999", "hi"]
    _quickly(tmp_path, argv, "--ranks 999 is more than this computer can run: at most")


def test_a_huge_machine_list_is_refused_in_under_two_seconds(toy_models: ToyModels, tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.json"
    many = [
        {"ssh": f"m{i}.local", "ips": [f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"]} for i in range(200_000)
    ]
    hosts.write_text(json.dumps(many))
    argv = ["generate", "--main", str(toy_models.main), "--hostfile", str(hosts), "hi"]
    _quickly(tmp_path, argv, "a machine list is at most 256 KB and 64 machines")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply to be a machine list"),
        (
            json.dumps(
                [
                    {"ssh": "-oProxyCommand=touch {marker}", "ips": ["10.0.0.1"]},
                    {"ssh": "b", "ips": ["10.0.0.2"]},
                ]
            ),
            "starts with '-', which ssh would read as an option",
        ),
        (json.dumps([{"ssh": "a", "ips": ["10.0.0.1"]}, {"ssh": "b;id", "ips": ["10.0.0.2"]}]), "holds ';'"),
    ],
)
def test_a_machine_list_ssh_could_misread_is_refused(toy_models: ToyModels, tmp_path: Path, content, words):
    marker = tmp_path / "ran"
    hosts = tmp_path / "hosts.json"
    hosts.write_text(content.replace("{marker}", str(marker)))
    done, _ = _run(tmp_path, "generate", "--main", str(toy_models.main), "--hostfile", str(hosts), "hi")
    _refused(done, words)
    assert not marker.exists()


@pytest.mark.parametrize("command", ["generate", "bench"])
def test_a_permuted_vocabulary_draft_is_refused_on_the_split_path(
    command: str, toy_models: ToyModels, toy_mismatched_draft: Path, tmp_path: Path
) -> None:
    tail = (
        ["hi"] if command == "generate" else ["--classes", "prose", "--modes", "fixed", "--max-tokens", "4"]
    )
    argv = [
        command,
        "--main",
        str(toy_models.main),
        "--draft",
        str(toy_mismatched_draft),
        "--ranks",
        "2",
        *tail,
    ]
    done, _ = _run(tmp_path, *argv)
    line = _refused(done, "token 300 differs")
    assert line.startswith("error: the draft ")


def test_a_main_too_large_for_memory_is_refused_on_the_split_path(
    toy_models: ToyModels, tmp_path: Path
) -> None:
    big = write_oversized_main(toy_models.main, tmp_path / "big")
    done, _ = _run(
        tmp_path, "generate", "--main", str(big), "--draft", str(toy_models.draft), "--ranks", "2", "hi"
    )
    _refused(done, "big split over 2 ranks needs 1025.0 GB of this computer's memory")


def test_a_hostfile_warns_of_public_addresses_and_names_the_machine_it_cannot_reach(
    toy_models: ToyModels, tmp_path: Path
) -> None:
    hosts = tmp_path / "hosts.json"
    hosts.write_text(
        json.dumps(
            [{"ssh": "127.0.0.1", "ips": ["127.0.0.1"]}, {"ssh": "nowhere.invalid", "ips": ["203.0.113.5"]}]
        )
    )
    done, _ = _run(tmp_path, "generate", "--main", str(toy_models.main), "--hostfile", str(hosts), "hi")
    assert done.returncode == 2, done.stderr
    warning, error = done.stderr.strip().splitlines()
    assert (
        warning.startswith("warning: This connection is not private")
        and "nowhere.invalid at 203.0.113.5" in warning
    )
    assert error.startswith("error: nowhere.invalid cannot be reached: "), error
    assert "the ranks stopped" not in error
