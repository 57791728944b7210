"""The checks a split main passes before any rank starts: the rank count against this computer
and the main's heads, the library's compatibility rules, and each machine's memory."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.distributed import preflight
from app.engine.distributed.hosts import NOT_PRIVATE, HostfileError
from app.engine.distributed.preflight import SplitRefused, check_placement, check_split, split_counts
from app.engine.distributed.probe import local_info, probe_script
from app.engine.library.store import Store
from app.engine.measure.toy import ToyModels
from tests.engine.distributed.oversized import write_oversized_main

ROOT = Path(__file__).resolve().parents[3]
GIB = 2**30


@pytest.fixture
def library(tmp_path: Path) -> Store:
    return Store(tmp_path / "library.sqlite3")


@pytest.fixture
def many_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "core_count", lambda: 16)


def _hostfile(tmp_path: Path, *hosts: tuple[str, str]) -> Path:
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps([{"ssh": name, "ips": [ip]} for name, ip in hosts]))
    return path


def test_more_ranks_than_cores_are_refused_before_the_model_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(preflight, "core_count", lambda: 4)
    with pytest.raises(SplitRefused, match=r"^--ranks 999 is more than this computer can run: at most 4"):
        check_placement(tmp_path / "no-such-model", 999, None)  # the folder is never looked at


def test_the_main_must_be_a_folder_here(tmp_path):
    with pytest.raises(SplitRefused, match="is not a model folder on this machine"):
        check_placement(tmp_path / "hub/repo", 2, None)


def test_counts_that_the_heads_do_not_divide_into_are_refused(toy_models: ToyModels, tmp_path, many_cores):
    """The toy main has 4 heads, 2 key-value heads and an MLP 768 wide: only 2 ranks split it."""
    assert check_placement(toy_models.main, 2, None).count == 2
    with pytest.raises(SplitRefused) as refused:
        check_placement(toy_models.main, 8, None)
    assert str(refused.value) == (
        "--ranks 8: main splits into at most 2 parts (4 attention heads, 2 key-value heads, 768 MLP width)"
    )
    with pytest.raises(SplitRefused, match="at least 2 ranks"):
        check_placement(toy_models.main, 1, None)
    wide = tmp_path / "wide"
    wide.mkdir()
    (wide / "config.json").write_text(
        json.dumps({"num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": 768})
    )
    with pytest.raises(SplitRefused) as refused:
        check_placement(wide, 3, None)
    assert str(refused.value) == (
        "--ranks 3: wide cannot be split into 3 parts "
        "(8 attention heads, 4 key-value heads, 768 MLP width must divide by it); choose 2 or 4"
    )


def test_the_machines_listed_count_like_ranks(toy_models: ToyModels, tmp_path):
    three = _hostfile(tmp_path, ("a", "10.0.0.1"), ("b", "10.0.0.2"), ("c", "10.0.0.3"))
    with pytest.raises(SplitRefused, match=r"^3 machines listed: main splits into at most 2 parts"):
        check_placement(toy_models.main, None, three)


def test_the_possible_counts_divide_every_size_the_split_cuts():
    config = {"num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336}
    assert split_counts(config, 64) == [2, 4, 8]
    assert split_counts(config, 4) == [2, 4]
    assert split_counts({}, 3) == [2, 3]  # nothing said: only the machine limits it


def test_a_permuted_vocabulary_draft_is_refused_before_any_rank(
    toy_models: ToyModels, toy_mismatched_draft: Path, library: Store
):
    with pytest.raises(SplitRefused, match="token 300 differs") as refused:
        check_split(toy_models.main, toy_mismatched_draft, ranks=2, store=library, usable=64 * GIB)
    assert refused.value.plain.startswith("the draft model can't guess ahead")
    # --force is the experiment the one-process path allows too
    plan = check_split(
        toy_models.main, toy_mismatched_draft, ranks=2, store=library, usable=64 * GIB, force=True
    )
    assert plan.count == 2


def test_local_ranks_must_fit_this_computer_together(toy_models: ToyModels, library: Store):
    plan = check_split(toy_models.main, toy_models.draft, ranks=2, store=library, usable=64 * GIB)
    need = sum(s.need for s in plan.shares)
    assert plan.shares[0].draft > 0 and plan.shares[1].draft == 0  # the draft runs on rank 0
    with pytest.raises(
        SplitRefused, match=r"^main split over 2 ranks needs .* GB of this computer's memory"
    ) as no:
        check_split(toy_models.main, toy_models.draft, ranks=2, store=library, usable=need - 1)
    assert "is free: choose a smaller model" in str(no.value)


def test_an_oversized_main_is_refused_against_the_real_free_memory(
    toy_models: ToyModels, tmp_path: Path, library: Store
):
    big = write_oversized_main(toy_models.main, tmp_path / "big")
    with pytest.raises(SplitRefused, match=r"big split over 2 ranks needs 10\d\d\.\d GB"):
        check_split(big, toy_models.draft, ranks=2, store=library)


def runner(host: str, script: str) -> list[str]:
    """`here` answers for real; `asleep` refuses ssh; `old` runs another MLX; `small` has 1 GB free."""
    if host == "asleep":
        return [
            "bash",
            "-c",
            "echo 'ssh: connect to host asleep port 22: Connection timed out' >&2; exit 255",
        ]
    if host in ("old", "small"):
        info = replace(
            local_info(), hostname=host, mlx_version="0.1.0" if host == "old" else local_info().mlx_version
        )
        if host == "small":
            info = replace(info, free_memory=GIB)
        return ["echo", json.dumps(info.to_json())]
    return ["bash", "-c", script]


def _listed(toy_models: ToyModels, library: Store, path: Path, main: Path | None = None, **kwargs):
    return check_split(
        main or toy_models.main,
        toy_models.draft,
        hostfile=path,
        store=library,
        runner=runner,
        timeout=60,
        **kwargs,
    )


@pytest.fixture(autouse=True)
def probe_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe runs this checkout's `app`, as the launcher would."""
    monkeypatch.setattr(
        "app.engine.distributed.probe.probe_script", lambda: probe_script(sys.executable, str(ROOT))
    )


def test_a_machine_that_cannot_be_reached_is_named_with_its_reason(toy_models, tmp_path, library):
    path = _hostfile(tmp_path, ("here", "10.0.0.1"), ("asleep", "10.0.0.2"))
    with pytest.raises(
        SplitRefused, match=r"^asleep cannot be reached: Could not connect with ssh: .*timed out$"
    ):
        _listed(toy_models, library, path)


def test_a_machine_with_other_versions_is_refused_before_any_rank(toy_models, tmp_path, library):
    path = _hostfile(tmp_path, ("here", "10.0.0.1"), ("old", "10.0.0.2"))
    with pytest.raises(SplitRefused, match=r"^old: Versions differ: MLX 0\.1\.0 there"):
        _listed(toy_models, library, path)


def test_each_machines_part_must_fit_what_it_has_free(toy_models, tmp_path, library):
    path = _hostfile(tmp_path, ("here", "10.0.0.1"), ("small", "10.0.0.2"))
    assert _listed(toy_models, library, path).count == 2  # the toy's half fits in 1 GB
    big = write_oversized_main(toy_models.main, tmp_path / "big")
    with pytest.raises(
        SplitRefused, match=r"^big's part does not fit on here: it needs model part 512\.0 GB"
    ) as no:
        _listed(toy_models, library, path, main=big)
    assert "(and 1 more)" in str(no.value), "the refusal counts the machines it did not name"
    assert "add a machine or choose a smaller model" in str(no.value), "the refusal says what to do"


def test_public_addresses_are_warned_about_as_soon_as_the_list_is_read(toy_models, tmp_path, library):
    path = _hostfile(tmp_path, ("here", "203.0.113.5"), ("asleep", "10.0.0.2"))
    warned: list[str] = []
    with pytest.raises(SplitRefused, match="asleep cannot be reached"):
        _listed(toy_models, library, path, warn=warned.append)
    assert warned == [f"{NOT_PRIVATE} (here at 203.0.113.5)"]


def test_a_bad_list_is_refused_before_any_machine_is_asked(toy_models, tmp_path, library):
    asked: list[str] = []
    path = _hostfile(tmp_path, ("here", "10.0.0.1"), ("-oProxyCommand=id", "10.0.0.2"))
    with pytest.raises(HostfileError, match="starts with '-'"):
        check_split(
            toy_models.main, None, hostfile=path, store=library, runner=lambda h, s: asked.append(h) or []
        )
    assert asked == []
