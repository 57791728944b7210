"""Render resources/icon.svg into the macOS .icns (and a PNG) with Qt, offscreen, in pure Python.

An .icns file is the 4-byte magic `icns`, the file's length (big-endian uint32), then chunks of
a 4-byte type, the chunk's length including its 8-byte header, and the data. Since macOS 10.7
every type below may hold a plain PNG, which is what we write:

    icp4 16, icp5 32, icp6 64, ic07 128, ic08 256, ic09 512,
    ic11 32 (16@2x), ic12 64 (32@2x), ic13 256 (128@2x), ic14 512 (256@2x), ic10 1024 (512@2x)

Usage: python packaging/make_icon.py [--svg resources/icon.svg] --icns OUT.icns [--png OUT.png]
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SVG = ROOT / "resources" / "icon.svg"

# (chunk type, pixel size), in the order Apple's iconutil writes them.
ICNS_TYPES: tuple[tuple[bytes, int], ...] = (
    (b"icp4", 16),
    (b"icp5", 32),
    (b"icp6", 64),
    (b"ic07", 128),
    (b"ic08", 256),
    (b"ic09", 512),
    (b"ic10", 1024),
    (b"ic11", 32),
    (b"ic12", 64),
    (b"ic13", 256),
    (b"ic14", 512),
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def render_pngs(svg: Path, sizes: set[int]) -> dict[int, bytes]:
    """PNG bytes of the SVG rendered at each square size, on a transparent background."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer
    from PySide6.QtWidgets import QApplication

    # A full QApplication, not a QGuiApplication: when this runs inside a process that later
    # makes widgets (the test suite), Qt aborts if the first application object lacked them.
    _app = QApplication.instance() or QApplication([sys.argv[0]])
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg} is not a valid SVG")
    out: dict[int, bytes] = {}
    for size in sorted(sizes):
        image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(0)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        renderer.render(painter)
        painter.end()
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        if not image.save(buffer, "PNG"):
            raise RuntimeError(f"Qt could not encode a {size}px PNG")
        buffer.close()
        out[size] = bytes(data.data())
    return out


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    chunks = b"".join(t + struct.pack(">I", 8 + len(pngs[s])) + pngs[s] for t, s in ICNS_TYPES)
    return b"icns" + struct.pack(">I", 8 + len(chunks)) + chunks


def read_icns(data: bytes) -> list[tuple[bytes, bytes]]:
    """The (type, payload) chunks of an .icns file; raises ValueError when it is malformed."""
    if data[:4] != b"icns" or struct.unpack(">I", data[4:8])[0] != len(data):
        raise ValueError("not an icns file, or its length field is wrong")
    chunks, offset = [], 8
    while offset < len(data):
        kind, length = data[offset : offset + 4], struct.unpack(">I", data[offset + 4 : offset + 8])[0]
        if length < 8 or offset + length > len(data):
            raise ValueError(f"chunk {kind!r} at {offset} has a bad length {length}")
        chunks.append((kind, data[offset + 8 : offset + length]))
        offset += length
    return chunks


def png_size(png: bytes) -> tuple[int, int]:
    if png[:8] != PNG_MAGIC or png[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return struct.unpack(">II", png[16:24])


def make_icon(svg: Path, icns: Path, png: Path | None = None, png_px: int = 512) -> None:
    pngs = render_pngs(svg, {s for _, s in ICNS_TYPES} | {png_px})
    icns.parent.mkdir(parents=True, exist_ok=True)
    icns.write_bytes(icns_bytes(pngs))
    if png is not None:
        png.parent.mkdir(parents=True, exist_ok=True)
        png.write_bytes(pngs[png_px])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--svg", type=Path, default=DEFAULT_SVG)
    parser.add_argument("--icns", type=Path, required=True)
    parser.add_argument("--png", type=Path, help="also write a 512 px PNG here")
    args = parser.parse_args(argv)
    make_icon(args.svg, args.icns, args.png)
    print(args.icns)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
