"""Rows read straight from a conversations file's table pages, for when SQLite cannot open it.

SQLite reads nothing without page 1: it holds the file header (the page size) and the table of
tables (where each table starts). A file whose first page is destroyed can still hold every
conversation on its other pages, so salvage walks them itself: each page that looks like a table
leaf (type byte 0x0D) has its cells' records decoded, and a record is kept for the table of our
schema whose column types it fits (a row is known by its shape, not by a page 1 it no longer has).
The page size, when the header is gone, is found by trying the common sizes, 4096 first. A WAL
beside the file supplies newer copies of pages. The `sqlite3` tool's `.recover` does this too, but
is not installed everywhere SpecChat runs.

Limits: pages freed by deletes are indistinguishable from live ones without page 1, so a deleted
row can come back; of two copies of one row, the one updated last is kept.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

LEAF_TABLE = 0x0D
PAGE_SIZES = (4096, 1024, 2048, 512, 8192, 16384, 32768, 65536)
HEADER_MAGIC = b"SQLite format 3\0"
WAL_MAGIC = (0x377F0682, 0x377F0683)
WAL_HEADER, FRAME_HEADER = 32, 24

Value = int | float | str | bytes | None
Pages = Callable[[int], bytes | None]  # page number (from 1) -> its bytes, None past the end


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    kinds: frozenset[type]  # the Python types a stored value may decode to
    has_default: bool  # may be missing from an old row (added later by ALTER TABLE)
    is_key: bool  # INTEGER PRIMARY KEY: stored as NULL, the row's rowid is its value


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[Column, ...]

    def fits(self, values: list[Value]) -> bool:
        """A record of this table: no more values than columns, every value of its column's
        type, and every missing trailing column one that an old row may lack."""
        if not values or len(values) > len(self.columns):
            return False
        if any(c.is_key or not c.has_default for c in self.columns[len(values) :]):
            return False
        return all(type(v) in c.kinds for v, c in zip(values, self.columns, strict=False))


def _kinds(declared: str, key: bool, not_null: bool) -> frozenset[type]:
    """What a column's stored values decode to, by its declared type's affinity: a REAL holding a
    whole number is stored as an integer."""
    if key:
        return frozenset({type(None)})
    kinds: set[type] = {int} if "INT" in declared else {int, float} if "REAL" in declared else {str}
    return frozenset(kinds if not_null else kinds | {type(None)})


def tables_of(db: sqlite3.Connection) -> list[Table]:
    """The shapes of `db`'s tables, read from the schema it was migrated to."""
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY rowid")]
    out = []
    for name in names:
        columns = []
        for _cid, col, declared, not_null, default, pk in db.execute(f'PRAGMA table_info("{name}")'):
            key = bool(pk) and str(declared).upper() == "INTEGER"
            kinds = _kinds(str(declared).upper(), key, bool(not_null))
            columns.append(Column(str(col), kinds, default is not None or not not_null, key))
        out.append(Table(str(name), tuple(columns)))
    return out


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's big-endian varint: (value, offset after it); IndexError past the end."""
    value = 0
    for i in range(8):
        byte = data[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


_INT_WIDTHS = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}


def decode_record(payload: bytes) -> list[Value] | None:
    """A record's values, or None when the bytes are not exactly one well-formed record."""
    try:
        header_size, at = _varint(payload, 0)
        if not at <= header_size <= len(payload):
            return None
        types = []
        while at < header_size:
            serial, at = _varint(payload, at)
            types.append(serial)
        if at != header_size:
            return None
        values: list[Value] = []
        body = header_size
        for serial in types:
            if serial in _INT_WIDTHS:
                width = _INT_WIDTHS[serial]
                values.append(int.from_bytes(payload[body : body + width], "big", signed=True))
                body += width
            elif serial == 7:
                values.append(struct.unpack(">d", payload[body : body + 8])[0])
                body += 8
            elif serial in (0, 8, 9):
                values.append(None if serial == 0 else serial - 8)
            elif serial >= 12:
                size = (serial - 12) // 2
                raw = payload[body : body + size]
                values.append(raw.decode("utf-8", "replace") if serial % 2 else raw)
                body += size
            else:
                return None  # 10 and 11 are reserved
            if body > len(payload):
                return None
        return values if body == len(payload) else None
    except (IndexError, struct.error):
        return None


def _payload(pages: Pages, page: bytes, cell: int, usable: int) -> tuple[int, bytes] | None:
    """A leaf table cell's (rowid, whole payload), its overflow chain followed."""
    size, at = _varint(page, cell)
    rowid, at = _varint(page, at)
    most = usable - 35
    if size <= most:
        local = size
    else:
        least = (usable - 12) * 32 // 255 - 23
        local = least + (size - least) % (usable - 4)
        local = local if local <= most else least
    data = page[at : at + local]
    if len(data) < local:
        return None
    if local < size:
        chunks, got, seen = [data], local, set()
        number = int.from_bytes(page[at + local : at + local + 4], "big")
        while got < size:
            overflow = pages(number) if number and number not in seen else None
            if overflow is None:
                return None
            seen.add(number)
            chunk = overflow[4:usable][: size - got]
            chunks.append(chunk)
            got += len(chunk)
            number = int.from_bytes(overflow[:4], "big")
        data = b"".join(chunks)
    return _signed(rowid), data


def _cells(pages: Pages, number: int, page: bytes, usable: int) -> Iterator[tuple[int, bytes]]:
    """(rowid, payload) of each cell of a table leaf page; nothing for any other page."""
    head = 100 if number == 1 else 0
    if len(page) < head + 8 or page[head] != LEAF_TABLE:
        return
    count = int.from_bytes(page[head + 3 : head + 5], "big")
    start = int.from_bytes(page[head + 5 : head + 7], "big") or 65536
    pointers = head + 8
    if count == 0 or pointers + 2 * count > start or start > usable:
        return
    offsets = [int.from_bytes(page[pointers + 2 * i : pointers + 2 * i + 2], "big") for i in range(count)]
    if any(not start <= o < usable for o in offsets):
        return  # not a leaf of this page size: its cells would lie outside the page
    for offset in offsets:
        try:
            cell = _payload(pages, page, offset, usable)
        except IndexError:
            cell = None
        if cell is not None:
            yield cell


def _wal_pages(path: Path) -> tuple[int, dict[int, bytes]]:
    """The WAL's page size and, per page, its last copy written since the WAL's last reset."""
    wal = Path(f"{path}-wal")
    try:
        data = wal.read_bytes()
    except OSError:
        return 0, {}
    if len(data) < WAL_HEADER or int.from_bytes(data[:4], "big") not in WAL_MAGIC:
        return 0, {}
    size = int.from_bytes(data[8:12], "big")
    if size not in PAGE_SIZES:
        return 0, {}
    salts, pages = data[16:24], {}
    at = WAL_HEADER
    while at + FRAME_HEADER + size <= len(data):
        if data[at + 8 : at + 16] == salts:  # a frame of an older WAL generation has other salts
            pages[int.from_bytes(data[at : at + 4], "big")] = data[
                at + FRAME_HEADER : at + FRAME_HEADER + size
            ]
        at += FRAME_HEADER + size
    return size, pages


def _header_size(data: bytes) -> tuple[int, int] | None:
    """(page size, reserved bytes per page) from an intact file header."""
    if not data.startswith(HEADER_MAGIC) or len(data) < 100:
        return None
    size = int.from_bytes(data[16:18], "big")
    size = 65536 if size == 1 else size
    return (size, data[20]) if size in PAGE_SIZES else None


def _walk(data: bytes, wal: dict[int, bytes], size: int, reserved: int) -> Iterator[tuple[int, bytes]]:
    count = max(len(data) // size, max(wal, default=0))

    def pages(number: int) -> bytes | None:
        if number in wal:
            return wal[number]
        if 1 <= number <= len(data) // size:
            return data[(number - 1) * size : number * size]
        return None

    for number in range(1, count + 1):
        page = pages(number)
        if page is not None:
            yield from _cells(pages, number, page, size - reserved)


def walk(path: Path, tables: list[Table]) -> dict[str, dict[int, list[Value]]]:
    """table name -> rowid -> values, for every record on a table leaf page of `path` (and its
    WAL) that fits exactly one of `tables`."""
    data = path.read_bytes()
    wal_size, wal = _wal_pages(path)
    header = _header_size(data)
    if wal_size:
        tries = [(wal_size, header[1] if header else 0)]
    else:
        tries = ([header] if header else []) + [
            (s, 0) for s in PAGE_SIZES if header is None or s != header[0]
        ]
    for size, reserved in tries:
        found = _sort(_walk(data, wal if size == wal_size else {}, size, reserved), tables)
        if any(found.values()):
            return found
    return {t.name: {} for t in tables}


def _sort(cells: Iterator[tuple[int, bytes]], tables: list[Table]) -> dict[str, dict[int, list[Value]]]:
    found: dict[str, dict[int, list[Value]]] = {t.name: {} for t in tables}
    for rowid, payload in cells:
        values = decode_record(payload)
        if values is None:
            continue
        fitting = [t for t in tables if t.fits(values)]
        if len(fitting) != 1:
            continue  # fits no table, or more than one: which it is cannot be told
        table, rows = fitting[0], found[fitting[0].name]
        if rowid not in rows or _newer(table, values, rows[rowid]):
            rows[rowid] = values
    return found


def _newer(table: Table, values: list[Value], than: list[Value]) -> bool:
    names = [c.name for c in table.columns]
    if "updated" not in names:
        return False
    i = names.index("updated")
    a, b = values[i], than[i]
    return isinstance(a, int | float) and isinstance(b, int | float) and a > b


def restore(found: dict[str, dict[int, list[Value]]], tables: list[Table], dest: sqlite3.Connection) -> int:
    """Insert the walked rows into `dest` with their rowids, leaving rows it already has; the
    columns an old row lacks take their defaults. Returns how many rows were added."""
    added = 0
    for table in tables:
        for rowid, values in sorted(found.get(table.name, {}).items()):
            pairs = [(c.name, v) for c, v in zip(table.columns, values, strict=False) if not c.is_key]
            names = ", ".join(["rowid", *(f'"{n}"' for n, _ in pairs)])
            marks = ", ".join("?" * (len(pairs) + 1))
            try:
                cur = dest.execute(
                    f'INSERT OR IGNORE INTO "{table.name}"({names}) VALUES ({marks})',
                    (rowid, *(v for _, v in pairs)),
                )
            except sqlite3.Error:
                continue
            added += max(cur.rowcount, 0)
    return added
