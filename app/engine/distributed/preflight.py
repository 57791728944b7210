"""What a split main must pass before any rank starts: the checks a pair loaded in one process
meets, plus the limits of splitting.

Cheapest first, so a mistyped count or the wrong file is refused in a moment, before any model
file is read or any program started:

1. `check_placement`: the machine list's size and shape (`hosts`), then the number of ranks
   against this computer's cores and what the main's heads divide into;
2. the library's compatibility rules for the draft (`pairing.require_compatible`), unless forced;
3. memory: each machine's share (`memory_split`) against what it has free. Local ranks share
   this computer's memory; listed machines are asked with the connection test (`probe`), which
   also names a machine that cannot be reached, and why.

`check_split` runs all three; its refusals are `SplitRefused`, one line each.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.distributed.hosts import MAX_MACHINES, Hostfile, read_hostfile
from app.engine.distributed.memory_split import HostShare, Verdict, gb, model_shape, split_fit
from app.engine.distributed.probe import TIMEOUT, ProbeResult, Runner, probe_hosts, ssh_runner
from app.engine.library.facts import ModelFacts, model_facts
from app.engine.library.safety import read_json
from app.engine.library.store import Store

DEFAULT_CONTEXT = 4096  # the model picker's default context, which the machines dialog weighs too
# what rank.load_shard splits: each must divide by the number of ranks
SPLIT_SIZES = (
    ("num_attention_heads", "attention heads"),
    ("num_key_value_heads", "key-value heads"),
    ("intermediate_size", "MLP width"),
)


class SplitRefused(ValueError):
    """The split cannot start; the message says why and what to do, in one line. `plain` is
    the window's headline where the message is technical ("" where it already is plain)."""

    def __init__(self, message: str, plain: str = "") -> None:
        super().__init__(message)
        self.plain = plain


@dataclass(frozen=True, slots=True)
class Placed:
    """Where the ranks will run: `count` local ranks, or the machines of `hostfile`."""

    count: int
    hostfile: Hostfile | None
    main: Path
    config: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SplitPlan:
    """A split that passed: how many ranks, and each one's share of the memory."""

    count: int
    shares: tuple[HostShare, ...]


def core_count() -> int:
    return os.cpu_count() or 1


def main_folder(main: str | os.PathLike[str]) -> Path:
    """Every rank opens the main as a folder at this path (see rank.load_shard)."""
    path = Path(main).expanduser()
    if not (path / "config.json").is_file():
        raise SplitRefused(
            f"{os.fsdecode(path)} is not a model folder on this machine: it has no config.json"
        )
    return path


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    inner = config.get("text_config")
    return {**config, **inner} if isinstance(inner, dict) else config


def split_counts(config: dict[str, Any], most: int) -> list[int]:
    """The rank counts from 2 to `most` that divide every size the split cuts."""
    sizes = [v for key, _ in SPLIT_SIZES if isinstance(v := config.get(key), int) and v > 0]
    return [n for n in range(2, most + 1) if all(size % n == 0 for size in sizes)]


def _sizes_words(config: dict[str, Any]) -> str:
    found = [f"{v} {words}" for key, words in SPLIT_SIZES if isinstance(v := config.get(key), int)]
    return ", ".join(found) or "its layer sizes"


def _count_problem(
    count: int, what: str, name: str, config: dict[str, Any], most: int, why_most: str
) -> str | None:
    """Why `count` ranks cannot split the main, in one line; None when they can."""
    if count < 2:
        return f"{what}: splitting the main model needs at least 2 ranks"
    allowed = split_counts(config, most)
    if count in allowed:
        return None
    sizes = _sizes_words(config)
    if not allowed:
        return f"{what}: {name} cannot be split here ({sizes}; {why_most})"
    if count > allowed[-1]:
        limit = f"{why_most}; {sizes}" if allowed[-1] == most else sizes
        return f"{what}: {name} splits into at most {allowed[-1]} parts ({limit})"
    choose = " or ".join(str(n) for n in allowed[:6])
    return f"{what}: {name} cannot be split into {count} parts ({sizes} must divide by it); choose {choose}"


def check_placement(
    main: str | os.PathLike[str], ranks: int | None, hostfile: str | os.PathLike[str] | None
) -> Placed:
    """The quick checks: the machine list's shape, the rank count against this computer and the
    main's heads. Reads the hostfile and the main's config.json only."""
    if (ranks is None) == (hostfile is None):
        raise SplitRefused("give either a number of local ranks or a hostfile")
    listed: Hostfile | None = None
    if hostfile is not None:
        listed = read_hostfile(Path(hostfile))  # HostfileError, a ValueError, in plain words
        count, what = (
            len(listed.hosts),
            f"{len(listed.hosts)} machine{'s' if len(listed.hosts) != 1 else ''} listed",
        )
        most, why_most = MAX_MACHINES, f"at most {MAX_MACHINES} machines"
    else:
        assert ranks is not None
        count, what = ranks, f"--ranks {ranks}"
        cores = core_count()
        most, why_most = min(cores, MAX_MACHINES), f"this computer runs at most {cores} ranks, one per core"
        if count > most:  # refused before the model is even looked at
            raise SplitRefused(
                f"--ranks {ranks} is more than this computer can run: at most {most}, one per core"
            )
    folder = main_folder(main)
    config = _text_config(read_json(folder / "config.json"))
    if (problem := _count_problem(count, what, folder.name, config, most, why_most)) is not None:
        raise SplitRefused(problem)
    return Placed(count, listed, folder, config)


def _require_compatible(main: Path, draft: str | os.PathLike[str], store: Store | None) -> None:
    from app.engine.decoding.loading import ModelLoadError
    from app.engine.library.pairing import require_compatible

    try:
        require_compatible(main, os.fspath(draft), store)
    except ModelLoadError as exc:
        raise SplitRefused(str(exc), exc.plain) from exc


def _draft_facts(draft: str | os.PathLike[str] | None, store: Store | None) -> ModelFacts | None:
    from app.engine.library.discovery import resolve_model

    if draft is None:
        return None
    try:
        return model_facts(resolve_model(os.fspath(draft)), store=store)
    except (FileNotFoundError, ValueError):
        return None  # a forced draft that is not here: the load says so


def _local_memory(placed: Placed, shares: list[HostShare], usable: int) -> None:
    """Local ranks share this computer: every rank's part, chat memory and margin add up."""
    need = sum(s.need for s in shares)
    if need > usable:
        raise SplitRefused(
            f"{placed.main.name} split over {placed.count} ranks needs {gb(need)} of this computer's "
            f"memory (each rank {gb(shares[-1].need)}, the first {gb(shares[0].draft)} more for the draft), "
            f"but {gb(usable)} is free: choose a smaller model, or split it across machines in a hostfile",
            "the main model does not fit in this computer's memory, even split",
        )


def _unreachable(results: list[ProbeResult]) -> None:
    lost = [f"{r.host} cannot be reached: {r.problem}" for r in results if r.problem]
    lost += [f"{r.host}: {r.mismatch}" for r in results if r.mismatch]
    if lost:
        more = f" (and {len(lost) - 1} more)" if len(lost) > 1 else ""
        raise SplitRefused(f"{lost[0]}{more}", "a machine in the list cannot take part")


def _machines_memory(placed: Placed, shares: list[HostShare]) -> None:
    full = [s for s in shares if s.verdict is Verdict.NO]
    if full:
        more = f" (and {len(full) - 1} more)" if len(full) > 1 else ""
        raise SplitRefused(
            f"{placed.main.name}'s part does not fit on {full[0].host}: it {full[0].explain()}{more}; "
            "add a machine or choose a smaller model",
            "the main model's part does not fit in a machine's memory",
        )


def check_split(
    main: str | os.PathLike[str],
    draft: str | os.PathLike[str] | None,
    *,
    ranks: int | None = None,
    hostfile: str | os.PathLike[str] | None = None,
    force: bool = False,
    store: Store | None = None,
    context: int = DEFAULT_CONTEXT,
    usable: int | None = None,
    runner: Runner = ssh_runner,
    timeout: float = TIMEOUT,
    warn: Callable[[str], None] | None = None,
) -> SplitPlan:
    """Every check a split main must pass before its ranks start; raises SplitRefused (or
    HostfileError) with the first problem. `usable`: this computer's free bytes (None: measured);
    `runner`/`timeout`: how listed machines are asked (the connection test's); `warn` hears, as
    soon as the list is read, that some of its addresses are not private."""
    placed = check_placement(main, ranks, hostfile)
    warning = placed.hostfile.public_warning() if placed.hostfile is not None else None
    if warning and warn is not None:
        warn(warning)
    if draft is not None and not force:
        _require_compatible(placed.main, draft, store)
    facts = model_facts(placed.main, store=store)
    shape = model_shape(placed.main, facts)
    draft_facts = _draft_facts(draft, store)
    if placed.hostfile is None:
        from app.engine.library.memory import usable_memory

        hosts: list[tuple[str, int | None]] = [(f"rank {i}", None) for i in range(placed.count)]
        shares = split_fit(facts, shape, hosts, context, draft_facts)
        _local_memory(placed, shares, usable if usable is not None else usable_memory())
        return SplitPlan(placed.count, tuple(shares))
    results = probe_hosts([h.ssh for h in placed.hostfile.hosts], runner=runner, timeout=timeout)
    _unreachable(results)
    hosts = [(r.host, r.info.free_memory if r.info else None) for r in results]
    shares = split_fit(facts, shape, hosts, context, draft_facts)
    _machines_memory(placed, shares)
    return SplitPlan(placed.count, tuple(shares))
