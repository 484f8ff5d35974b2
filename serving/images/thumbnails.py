"""Small JPEG previews of stored items, made within the uploads' decode budget and cached in memory.

The path always comes from the item table, never from the client, so a request cannot read an
arbitrary file. A preview is decoded like an upload: in one of the ``max_concurrent_decodes`` slots
(the same limiter), refused from its header when decoding would need more than ``max_decode_mb``
(a JPEG decodes at a reduced scale first), and made once however many requests ask for it at the same
time: they wait for the one decode in flight. Previews are cached by (file, modification time, size),
so a changed file gets a new preview and a new ETag. Where the service hides paths (``shows_paths``
off), a refusal names only the file, never the server's directories (issue 44).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path, PurePath

import anyio
from PIL import Image

from retrieval.indexing.common.errors import DataError, ItemNotFoundError
from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.store.shared.items.item_paths import added_by_vector
from retrieval.indexing.store.shared.items.items_db import Item

JPEG_QUALITY = 85
CACHED_PREVIEWS = 2048  # about 5-10 KB each at 160 px


@dataclass(frozen=True)
class Thumbnail:
    jpeg: bytes
    etag: str


_Key = tuple[str, int, int]  # path, modification time (ns), size


class ThumbnailMaker:
    """Previews of a given size, sharing the uploads' decode slots and memory budget (event loop only)."""

    def __init__(
        self,
        max_side: int,
        *,
        max_pixels: int,
        max_decode_bytes: int,
        decode_slots: anyio.CapacityLimiter,
        shows_paths: bool = True,
    ) -> None:
        self.max_side, self._shows_paths = max_side, shows_paths
        self._max_pixels, self._max_decode_bytes = max_pixels, max_decode_bytes
        self._slots = decode_slots
        self._cache: OrderedDict[_Key, Thumbnail] = OrderedDict()
        self._in_flight: dict[_Key, asyncio.Task[Thumbnail]] = {}

    async def thumbnail_for(self, item: Item) -> Thumbnail:
        """A JPEG of ``item`` whose longer side is at most ``max_side``; ItemNotFoundError when its image
        file is gone, unreadable, or over the decode budget, or it has none (an item added by its vector)."""
        if added_by_vector(item.path):
            raise ItemNotFoundError(f"item {item.id} was added by its vector and has no image")
        try:
            stat = Path(item.path).stat()
            key = (str(item.path), stat.st_mtime_ns, stat.st_size)
            if (cached := self._cache.get(key)) is not None:
                self._cache.move_to_end(key)
                return cached
            task = self._in_flight.get(key)
            if task is None:
                task = self._in_flight[key] = asyncio.ensure_future(self._make(key))
            return await asyncio.shield(task)  # a request that times out leaves the decode to the others
        except (OSError, DataError) as error:
            raise ItemNotFoundError(
                f"the image file of item {item.id} is missing or unreadable on the server ({self._reason(error)})"
            ) from None

    def _reason(self, error: OSError | DataError) -> str:
        """The error as said, or, with paths hidden, an OSError by its reason alone (its text holds the
        path; the decoder's own errors name only the file, ``_render``)."""
        if self._shows_paths or not isinstance(error, OSError):
            return str(error)
        return error.strerror or type(error).__name__

    async def _make(self, key: _Key) -> Thumbnail:
        try:
            thumb = await anyio.to_thread.run_sync(self._render, key[0], limiter=self._slots)
        finally:
            del self._in_flight[key]
        self._cache[key] = thumb
        while len(self._cache) > CACHED_PREVIEWS:
            self._cache.popitem(last=False)
        return thumb

    def _render(self, path: str) -> Thumbnail:
        name = None if self._shows_paths else PurePath(path).name  # as item_views.shown_path shows it
        image = decode_for_thumbnail(Path(path), self.max_side, self._max_pixels, self._max_decode_bytes, name)
        image.thumbnail((self.max_side, self.max_side), Image.Resampling.BILINEAR)
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
        jpeg = buffer.getvalue()
        return Thumbnail(jpeg=jpeg, etag='"' + hashlib.sha256(jpeg).hexdigest()[:32] + '"')


def decode_for_thumbnail(
    path: Path, max_side: int, max_pixels: int, max_decode_bytes: int, name: str | None = None
) -> Image.Image:
    """``path`` as RGB for a preview of ``max_side``: a JPEG at its smallest sufficient scale, any image
    refused from its header when decoding it would need more than ``max_decode_bytes``; ``name`` labels
    errors instead of the path."""
    return open_rgb(path, max_pixels, max_decode_bytes=max_decode_bytes, reduce_to=(max_side, max_side), name=name)
