"""One rank's process: `python -m app.engine.distributed.rank --main M [--draft D]`, run by
`mlx.launch` on every rank (see `launcher.py`).

Every rank joins the group, checks that all run the same MLX and SpecChat (before any weights
are read), loads its shard of the main lazily (only its shard is ever in memory), and reports
whether that worked. Followers then run rank 0's passes until told to stop; rank 0 loads the
draft and serves the caller (`serve.py`). Each rank leaves once the launcher that ran it is gone
(`guard.py`). Rank 0's stdout carries only its framed messages: all else it prints goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

import mlx.core as mx
from mlx_lm.utils import load as mlx_load

import app
from app.engine.decoding.loading import LoadedModel, ModelLoadError, ModelPair, check_safetensors, load_model
from app.engine.distributed.collective import Channel, ShardedMain, follow
from app.engine.distributed.guard import guard_rank
from app.engine.distributed.serve import Output, serve
from app.engine.distributed.wire import TOKEN_ENV, RankInfo, Ready, read_session_token, version_mismatch


def load_shard(source: str, group: Any) -> LoadedModel:
    """This rank's shard of the main: loaded lazily, split, then read (only the shard's bytes)."""
    path = Path(source).expanduser()
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"{path} is not a model folder on this machine: it has no config.json")
    for weights in sorted(path.glob("*.safetensors")):
        check_safetensors(weights)
    model, tokenizer, config = mlx_load(str(path), return_config=True, lazy=True, trust_remote_code=False)  # type: ignore[misc]
    size = group.size()
    if not hasattr(model, "shard"):
        raise ModelLoadError(
            f"{path.name} ({config.get('model_type')}) cannot be split across machines: "
            "mlx-lm has no tensor-parallel sharding for this architecture"
        )
    for key in ("num_attention_heads", "num_key_value_heads", "intermediate_size"):
        value = config.get(key)
        if isinstance(value, int) and value % size:
            raise ModelLoadError(f"{path.name}'s {key} ({value}) does not divide by {size} ranks")
    model.shard(group)
    mx.eval(model.parameters())
    return LoadedModel(model=model, tokenizer=tokenizer, config=config, source=source)


def _load(
    args: argparse.Namespace, group: Any, rank: int
) -> tuple[LoadedModel | None, LoadedModel | None, str]:
    """This rank's shard (and rank 0's draft), or the reason it failed in one line."""
    try:
        main = load_shard(args.main, group)
        draft = load_model(args.draft) if rank == 0 and args.draft else None
    except Exception as exc:  # any failure is reported to rank 0, which tells the caller
        return None, None, f"{type(exc).__name__}: {exc}"
    if draft is not None:
        main_vocab, draft_vocab = main.config.get("vocab_size"), draft.config.get("vocab_size")
        if (
            isinstance(main_vocab, int)
            and isinstance(draft_vocab, int)
            and abs(main_vocab - draft_vocab) > 128
        ):
            return (
                None,
                None,
                f"the draft's vocabulary ({draft_vocab}) does not match the main's ({main_vocab})",
            )
    return main, draft, ""


@dataclass
class Joined:
    """Rank 0 once every rank has loaded its shard: the pair to decode with."""

    pair: ModelPair
    sharded: ShardedMain
    ranks: list[RankInfo]


def join(main: str, draft: str | None, report: Callable[[dict[str, Any]], None]) -> Joined | int:
    """Join the group, check versions, load. Rank 0 gets the pair (`report` carries its word to
    the caller); a follower runs rank 0's passes until stopped; either gets an exit code on a
    failure, which `report` names on rank 0."""
    guard_rank()
    group = mx.distributed.init(strict=True)
    channel = Channel(group)
    rank = channel.rank
    me = RankInfo(
        rank, socket.gethostname(), os.getpid(), str(getattr(mx, "__version__", "?")), app.__version__
    )
    infos = [RankInfo.from_text(text) for text in channel.gather_text(me.to_text())]
    mismatch = version_mismatch(infos)
    if mismatch is not None:
        if rank == 0:
            report({"t": "fatal", "message": mismatch})
        print(f"rank {rank}: {mismatch}", file=sys.stderr)
        return 3
    if rank == 0:
        report({"t": "hello", "ranks": [i.to_text() for i in infos]})
    args = argparse.Namespace(main=main, draft=draft)
    shard, draft_model, error = _load(args, group, rank)
    errors = channel.gather_text(error)
    failed = [f"rank {i} ({infos[i].host}): {e}" for i, e in enumerate(errors) if e]
    if failed:
        if rank == 0:
            report({"t": "fatal", "message": "could not load the model: " + "; ".join(failed)})
        return 4
    assert shard is not None
    if rank != 0:
        follow(shard.model, channel)
        return 0
    sharded = ShardedMain(shard.model, channel)
    pair_main = LoadedModel(
        model=sharded, tokenizer=shard.tokenizer, config=shard.config, source=shard.source
    )
    return Joined(ModelPair(main=pair_main, draft=draft_model), sharded, infos)


def message_stream() -> IO[str]:
    """This process's stdout, kept for the caller's messages; fd 1 (print, and any library
    writing to it) now goes to stderr, so nothing else reaches the launcher's stdout."""
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2, 1)
    return open(kept, "w", encoding="utf-8", buffering=1)


def run(args: argparse.Namespace) -> int:
    stream = message_stream()
    token = os.environ.get(TOKEN_ENV, "")
    if not token and os.environ.get("MLX_RANK", "0") == "0":
        token = read_session_token(sys.stdin) or ""  # ssh carried no environment: the caller wrote it
        if not token:
            print(
                "rank 0: no session token reached this rank; start the ranks from SpecChat", file=sys.stderr
            )
            return 5
    out = Output(stream, token)
    joined = join(args.main, args.draft, out.send)
    if isinstance(joined, int):
        return joined
    ready = Ready(ranks=joined.ranks, main=args.main, draft=args.draft)
    serve(joined.pair, joined.sharded, ready, out, sys.stdin, token)
    return 0


def exit_now(code: int) -> NoReturn:
    """Leave without MLX's group teardown, which may wait on a peer that is gone."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.engine.distributed.rank")
    parser.add_argument("--main", required=True)
    parser.add_argument("--draft")
    args = parser.parse_args(argv)
    try:
        code = run(args)
    except BaseException as exc:
        # a lost peer or a bug: say it, and leave at once (a collective may never return)
        print(f"rank {os.environ.get('MLX_RANK', '?')}: {type(exc).__name__}: {exc}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        exit_now(1)
    exit_now(code)


if __name__ == "__main__":
    raise SystemExit(main())
