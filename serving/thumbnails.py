"""Small JPEG previews of stored items, cached in memory by (file, modification time, size).

The path always comes from the item table, never from the client, so a request cannot
read an arbitrary file. A changed file gets a new cache key and a new ETag.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from PIL import Image

from retrieval.indexing.data.image_io import open_rgb

JPEG_QUALITY = 85


@dataclass(frozen=True)
class Thumbnail:
    jpeg: bytes
    etag: str


def thumbnail_for(path: str | Path, max_side: int) -> Thumbnail:
    """A JPEG whose longer side is at most ``max_side``; raises DataError if the file is unreadable."""
    stat = Path(path).stat()
    return _cached(str(path), stat.st_mtime_ns, stat.st_size, max_side)


@lru_cache(maxsize=2048)
def _cached(path: str, mtime_ns: int, size: int, max_side: int) -> Thumbnail:
    image = open_rgb(Path(path))
    image.thumbnail((max_side, max_side), Image.Resampling.BILINEAR)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    jpeg = buffer.getvalue()
    return Thumbnail(jpeg=jpeg, etag='"' + hashlib.sha256(jpeg).hexdigest()[:32] + '"')
