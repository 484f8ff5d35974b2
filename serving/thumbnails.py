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

from retrieval.indexing.common.errors import DataError, ItemNotFoundError
from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.store.shared.items_db import Item

JPEG_QUALITY = 85


@dataclass(frozen=True)
class Thumbnail:
    jpeg: bytes
    etag: str


def thumbnail_for(item: Item, max_side: int) -> Thumbnail:
    """A JPEG of ``item`` whose longer side is at most ``max_side``.

    An item whose image file is gone or unreadable has nothing to show: ItemNotFoundError.
    """
    try:
        stat = Path(item.path).stat()
        return _cached(str(item.path), stat.st_mtime_ns, stat.st_size, max_side)
    except (OSError, DataError):
        raise ItemNotFoundError(f"the image file of item {item.id} is missing or unreadable on the server") from None


@lru_cache(maxsize=2048)
def _cached(path: str, mtime_ns: int, size: int, max_side: int) -> Thumbnail:
    image = open_rgb(Path(path))
    image.thumbnail((max_side, max_side), Image.Resampling.BILINEAR)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    jpeg = buffer.getvalue()
    return Thumbnail(jpeg=jpeg, etag='"' + hashlib.sha256(jpeg).hexdigest()[:32] + '"')
