"""The one cleaning step for text on its way to a tokenizer or the database.

Text from the clipboard, files, command-line arguments or a model's bytes can carry invalid
UTF-8 or lone surrogates; a tokenizer refuses the latter outright and SQLite stores them
unreadably, so every such path passes through `clean_text` first.
"""

from __future__ import annotations

import re

_SURROGATES = re.compile("[\ud800-\udfff]")


def clean_text(text: str | bytes) -> str:
    """One replacement for every kind of bad text: invalid UTF-8 and lone surrogates become U+FFFD."""
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "replace")
    return _SURROGATES.sub("\ufffd", text)
