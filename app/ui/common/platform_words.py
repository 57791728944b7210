"""Words that name the user's machine, for the UI: "this Mac" only on macOS."""

from __future__ import annotations

from app.engine.platform_words import capital, machine, machines, on_a_mac, this_machine

__all__ = ["capital", "machine", "machines", "on_a_mac", "this_machine"]
