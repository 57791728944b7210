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
    if text.isascii():  # known without reading it: most text, at once
        return text
    try:  # the encoder finds a surrogate far faster than the pattern (10 ms a megabyte) does
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text)
    return text
