"""Words that name the user's machine: "this Mac" only on macOS."""

from __future__ import annotations

import sys


def this_machine() -> str:
    return "this Mac" if sys.platform == "darwin" else "this computer"
