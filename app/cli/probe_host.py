"""`python -m app probe-host` (hidden): one JSON line about this machine, for the connection
test another machine runs over ssh before splitting a model across both."""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options: the asking machine reads whatever this one has


def run(args: argparse.Namespace) -> int:
    from app.engine.distributed.probe import local_info

    print(json.dumps(local_info().to_json()), flush=True)
    return 0
