"""Tall, narrow PNGs written row by row (issue 44): a 1 x 40,000,000 one costs no memory to make."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def tall_png(path: Path, mode: str, size: tuple[int, int]) -> None:
    """A PNG of ``size`` in ``mode`` (8-bit L, RGB or RGBA), written row by row: the image itself is never
    made, so writing a 1 x 40,000,000 one costs no memory."""
    channels = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
    width, height = size
    row = b"\0" + bytes(range(7, 7 + width * channels))  # filter byte 0, then the pixels
    packer, chunks, step = zlib.compressobj(6), [], 1 << 16
    for start in range(0, height, step):
        chunks.append(packer.compress(row * min(step, height - start)))
    chunks.append(packer.flush())
    kind = {"L": 0, "RGB": 2, "RGBA": 6}[mode]

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, kind, 0, 0, 0))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", b"".join(chunks)) + chunk(b"IEND", b""))
