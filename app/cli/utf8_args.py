"""Arguments that are not UTF-8 are refused in one line, before any command runs.

A name the terminal passed as bytes that are not UTF-8 reaches Python with surrogate escapes;
MLX, Qt, SQLite and JSON cannot take it (MLX stops with `std::bad_cast`), so every file, folder,
model or option value is checked here, once for every command, instead of failing deep inside.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from app.engine.library.paths import is_utf8, shown_name

# Message text only reaches the tokenizer, which is given a cleaned copy: not refused.
FREE_TEXT = frozenset({"prompt", "system"})


def not_utf8_refusal(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """One line naming the first argument that is not UTF-8, or None when all are."""
    for action in parser._actions:
        if action.dest in FREE_TEXT:
            continue
        value = getattr(args, action.dest, None)
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, str | Path) and not is_utf8(str(item)):
                name = (
                    action.option_strings[0] if action.option_strings else str(action.metavar or action.dest)
                )
                return (
                    f"error: {name} {shown_name(str(item))} is not a UTF-8 name, which SpecChat cannot use;"
                    " rename it or choose another"
                )
    return None
