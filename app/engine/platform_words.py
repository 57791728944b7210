"""Words that name the user's machine: "this Mac" only on macOS, "this computer" elsewhere.

It sits outside the engine's layers and imports nothing of the app, so every layer that words a
message (the GGUF import, the machines of a split main) and the UI can all use it.
"""

from __future__ import annotations

import sys


def on_a_mac() -> bool:
    return sys.platform == "darwin"


def this_machine() -> str:
    """How a message names the computer it runs on: "this Mac" or "this computer"."""
    return "this Mac" if on_a_mac() else "this computer"


def machine() -> str:
    """One such computer, without "this": "Mac" or "computer"."""
    return "Mac" if on_a_mac() else "computer"


def machines() -> str:
    """Several such computers: "Macs" or "computers"."""
    return machine() + "s"


def capital(words: str) -> str:
    """The words starting a sentence: "This computer"."""
    return words[:1].upper() + words[1:]
