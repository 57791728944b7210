"""Checking downloaded files against the checksums the hub lists for them.

The hub's tree listing gives the SHA-256 of every LFS file's contents and, for small files kept
in git, the git blob id (SHA-1 of a "blob <size>" header and the contents). Files are hashed in
chunks because shards are gigabytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CHUNK = 8 << 20


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """One file of a hub listing: its path in the repo, size and checksum."""

    name: str
    size: int
    sha256: str | None  # the contents' SHA-256, listed for LFS files
    blob_id: str  # the git blob id, the only checksum listed for small files

    @property
    def expected(self) -> str:
        return (self.sha256 or self.blob_id).lower()


def file_digest(path: Path, remote: RemoteFile, on_chunk: Callable[[int], None] = lambda n: None) -> str:
    """The checksum of `path` in the kind the listing gives for `remote`; on_chunk gets each chunk's size."""
    if remote.sha256:
        h = hashlib.sha256()
    else:
        h = hashlib.sha1(usedforsecurity=False)
        h.update(b"blob %d\0" % path.stat().st_size)
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            on_chunk(len(chunk))
    return h.hexdigest()


def matches(path: Path, remote: RemoteFile, on_chunk: Callable[[int], None] = lambda n: None) -> bool:
    return path.stat().st_size == remote.size and file_digest(path, remote, on_chunk) == remote.expected
