"""``GET /items/{id}/image``: a stored item's image at full size, for the page's click-through.

The path comes from the item table, never from the client, as for thumbnails (and with the same rules:
no API key to read, 404 for an item whose file is gone or unreadable). An image a browser shows (JPEG,
PNG, WebP, GIF) is sent as stored, streamed from disk, once its header passed the pixel limit; any other
(BMP, TIFF) is decoded like an upload, in one of the decode slots and within the decode budget
(``max_decode_mb``, ``max_pixels``), and sent as PNG. The ETag follows the file (modification time and
size), so a browser asks again only after the file changed.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import anyio
from fastapi.responses import FileResponse, Response
from PIL import Image

from retrieval.indexing.common.errors import DataError, ItemNotFoundError
from retrieval.indexing.data.image_io import DECODE_ERRORS, UPLOAD_FORMATS, check_pixel_limit, open_rgb_bytes
from retrieval.indexing.store.shared.items.item_paths import added_by_vector
from retrieval.indexing.store.shared.items.items_db import Item
from retrieval.serving.settings import ServeSettings

SHOWN_AS_STORED = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp", "GIF": "image/gif"}
IMAGE_CACHE = "public, max-age=3600"


@dataclass(frozen=True)
class StoredImage:
    path: Path
    image_format: str
    etag: str


def image_url(item_id: int) -> str:
    return f"/items/{item_id}/image"


def stored_image(item: Item, max_pixels: int) -> StoredImage:
    """The item's file, its format and ETag, from the header alone; ItemNotFoundError when it cannot be shown."""
    path = Path(item.path)
    if added_by_vector(path):
        raise ItemNotFoundError(f"item {item.id} was added by its vector and has no image")
    try:
        stat = path.stat()
        with Image.open(path, formats=UPLOAD_FORMATS) as image:  # the header only: nothing is decoded here
            check_pixel_limit(image.size, max_pixels)
            image_format = str(image.format)
    except DECODE_ERRORS as error:
        reason = "missing" if isinstance(error, FileNotFoundError) else "unreadable or too large to show"
        raise ItemNotFoundError(f"the image file of item {item.id} is {reason} on the server") from None
    return StoredImage(path, image_format, f'"{stat.st_mtime_ns:x}-{stat.st_size:x}"')


async def image_response(item: Item, settings: ServeSettings, decode_slots: anyio.CapacityLimiter) -> Response:
    """The response of ``GET /items/{id}/image`` (without the conditional 304, which the route answers)."""
    stored = await anyio.to_thread.run_sync(stored_image, item, settings.max_pixels)
    headers = {"Cache-Control": IMAGE_CACHE, "ETag": stored.etag}
    media_type = SHOWN_AS_STORED.get(stored.image_format)
    if media_type is not None:
        return FileResponse(stored.path, media_type=media_type, headers=headers)
    png = await anyio.to_thread.run_sync(_as_png, item, settings, limiter=decode_slots)
    return Response(png, media_type="image/png", headers=headers)


def _as_png(item: Item, settings: ServeSettings) -> bytes:
    """Decode a format browsers do not show, within the uploads' budget, and encode it as PNG."""
    budget = settings.max_decode_mb << 20
    try:
        if Path(item.path).stat().st_size > budget:
            raise DataError(f"the file is larger than the decode budget of {settings.max_decode_mb} MB")
        image = open_rgb_bytes(
            Path(item.path).read_bytes(), settings.max_pixels, name=f"item {item.id}", max_decode_bytes=budget
        )
    except (OSError, DataError):
        raise ItemNotFoundError(f"the image file of item {item.id} is unreadable or too large to show") from None
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
