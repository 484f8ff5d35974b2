"""Uploaded images: body size limit, declared content type, size of each file.

Checks run cheapest first: the request body size (before multipart parsing, so a huge
upload is refused without being spooled), the declared content type, the file's size,
then decoding (``image_io.open_rgb_bytes`` in a worker thread, with the decompression-bomb
pixel limit). Each failure is an error type that ``problems.ERROR_STATUSES`` answers: 413, 415, and a
``DataError`` (400) for an empty or undecodable file.
"""

from __future__ import annotations

from fastapi import UploadFile

from retrieval.indexing.common.errors import DataError
from retrieval.serving.http.service_errors import PayloadTooLargeError, UnsupportedMediaTypeError

ACCEPTED_TYPES = frozenset(
    {"image/jpeg", "image/jpg", "image/pjpeg", "image/png", "image/webp", "image/gif", "image/bmp", "image/tiff"}
)
# Browsers and curl send these for files whose type they do not know; the decoder decides then.
UNTYPED = frozenset({"", "application/octet-stream", "binary/octet-stream"})
MULTIPART_SLACK_BYTES = 64 * 1024
READ_CHUNK_BYTES = 256 * 1024


def check_content_type(upload: UploadFile) -> None:
    declared = (upload.content_type or "").split(";")[0].strip().lower()
    if declared not in ACCEPTED_TYPES and declared not in UNTYPED:
        raise UnsupportedMediaTypeError(
            f"file '{upload.filename}' was sent as '{declared}'; upload a JPEG, PNG, WebP, GIF, BMP or TIFF image."
        )


async def read_upload(upload: UploadFile, max_bytes: int) -> bytes:
    """The file's bytes; 413 when larger than ``max_bytes``, 400 when empty."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await upload.read(READ_CHUNK_BYTES):
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLargeError(
                f"file '{upload.filename}' is larger than the limit of {max_bytes} bytes; send a smaller image."
            )
        chunks.append(chunk)
    if size == 0:
        raise DataError(f"file '{upload.filename}' is empty; send an image file.")
    return b"".join(chunks)
