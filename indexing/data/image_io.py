"""Read any image a user may hand us as an 8-bit RGB ``PIL.Image``, or fail with one sentence.

Everything that decodes pixels (training datasets, gallery indexing, the upload endpoint)
goes through here so that EXIF rotation, odd colour modes and hostile files are handled
once. Pixels are fully loaded before returning, so a truncated file fails here and not
later inside a data-loader worker. No global PIL state is changed: truncated images stay
errors, and the pixel limit is checked against the header size before decoding.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import IO

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from retrieval.indexing.common.errors import DataError

#: Pillow's own default ``Image.MAX_IMAGE_PIXELS`` (about 89 megapixels, 0.25 GB as RGB).
DEFAULT_MAX_PIXELS = 89_478_485

_WHITE = (255, 255, 255)
_ALPHA_MODES = {"RGBA", "LA", "PA", "RGBa", "La"}
_HIGH_DEPTH_MODES = {"I", "I;16", "I;16L", "I;16B", "I;16N", "F"}


def open_rgb(
    path: Path,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    *,
    max_decode_bytes: int | None = None,
    reduce_to: tuple[int, int] | None = None,
    name: str | None = None,
) -> Image.Image:
    """Open ``path`` as an upright, fully loaded 8-bit RGB image.

    Raises ``DataError("cannot read image <path>: <reason>")`` for missing, corrupt,
    truncated or non-image files and for images with more than ``max_pixels`` pixels.
    ``max_decode_bytes`` refuses, from the header, an image whose decoding would need more memory;
    ``reduce_to`` lets a JPEG decode at the smallest scale (1/2, 1/4, 1/8) that still covers that size
    (a preview), before the memory check. ``name`` labels errors instead of the path (one not to show).
    """
    return _read(lambda: open(path, "rb"), name or str(path), max_pixels, None, max_decode_bytes, reduce_to)


#: The only decoders an upload may reach, whatever its declared type says and whatever plugins
#: are installed (no EPS -> Ghostscript, no exotic formats): JPEG (its opener also reads MPO), PNG, WebP,
#: GIF, BMP and TIFF, the types the service accepts.
UPLOAD_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF")


def open_rgb_bytes(
    data: bytes,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    name: str = "<upload>",
    max_decode_bytes: int | None = None,
    reduce_to: tuple[int, int] | None = None,
) -> Image.Image:
    """Like :func:`open_rgb` for an in-memory file (an HTTP upload); ``name`` labels errors.
    Only the ``UPLOAD_FORMATS`` decoders are tried: decoding follows these, not the content.
    ``max_decode_bytes`` refuses, from the header, an image whose decoding would need more memory;
    ``reduce_to`` as for :func:`open_rgb` (the pixel limit still applies to the full size)."""
    return _read(lambda: io.BytesIO(data), name, max_pixels, UPLOAD_FORMATS, max_decode_bytes, reduce_to)


def _read(
    opener: Callable[[], IO[bytes]],
    name: str,
    max_pixels: int,
    formats: tuple[str, ...] | None = None,
    max_decode_bytes: int | None = None,
    reduce_to: tuple[int, int] | None = None,
) -> Image.Image:
    try:
        with opener() as handle, Image.open(handle, formats=formats) as image:
            check_pixel_limit(image.size, max_pixels)
            if reduce_to is not None:
                image.draft(None, reduce_to)  # JPEG only: the size below is then the reduced one
            check_decode_budget(image, max_decode_bytes)
            image.load()
            apply_exif_orientation(image)
            return to_rgb(image)
    except DECODE_ERRORS as error:
        raise DataError(f"cannot read image {name}: {decode_failure_reason(error)}") from None


def apply_exif_orientation(image: Image.Image) -> None:
    """Turn a loaded ``image`` upright by its EXIF Orientation, in place (a copy only when it rotates).

    Malformed EXIF is not an error: the metadata is optional. If it cannot be read the image is used as
    stored; if the orientation was applied but the rest cannot be rewritten, the EXIF block is dropped
    so that nothing downstream rotates the pixels a second time. Pillow's EXIF reader and writer raise
    almost any type on hostile metadata (a rational tag stored as ASCII: TypeError; fuzzed entries:
    struct.error, AttributeError, ValueError), so every error of this optional step is caught."""
    try:
        ImageOps.exif_transpose(image, in_place=True)
    except Exception:
        image.info.pop("exif", None)


#: What opening or decoding a hostile or broken file can raise (Pillow's decoders use all of these).
DECODE_ERRORS = (DataError, OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError)


def decode_failure_reason(error: BaseException) -> str:
    """Why an image could not be read, in a few words: the one mapping from decoder errors to reasons."""
    if isinstance(error, FileNotFoundError):
        return "file not found"
    if isinstance(error, IsADirectoryError):
        return "it is a directory, not a file"
    if isinstance(error, UnidentifiedImageError):
        return "not a recognised image format"
    if isinstance(error, (DataError, Image.DecompressionBombError)):
        return str(error)
    return describe_decode_error(error)


def check_pixel_limit(size: tuple[int, int], max_pixels: int) -> None:
    """Refuse a decompression bomb from its header size, before any pixel is decoded."""
    width, height = size
    if width <= 0 or height <= 0:
        raise DataError(f"the header gives an empty size {width}x{height}")
    if width * height > max_pixels:
        raise DataError(
            f"{width}x{height} = {width * height:,} pixels exceeds the limit of {max_pixels:,} "
            "(a possible decompression bomb; downscale the image or raise max_pixels)"
        )


def describe_decode_error(error: BaseException) -> str:
    """A short reason for a Pillow decoding exception (its message, or its type if empty)."""
    text = str(error).strip() or type(error).__name__
    if "truncat" in text.lower() or isinstance(error, EOFError):
        return f"the file is truncated or incomplete ({text})"
    return text


def to_rgb(image: Image.Image) -> Image.Image:
    """Convert any Pillow mode to 8-bit RGB; transparency is composited on white. Intermediates are
    dropped as soon as they are used (``decode_estimate_of`` counts what stays alive at once)."""
    if image.mode == "RGB":
        return image.copy()
    if image.mode == "P" and "transparency" in image.info:
        return _composite_on_white(image.convert("RGBA"))
    if image.mode in _ALPHA_MODES:
        return _composite_on_white(image if image.mode == "RGBA" else image.convert("RGBA"))
    if image.mode in _HIGH_DEPTH_MODES:
        return _high_depth_to_rgb(image)
    return image.convert("RGB")


def _composite_on_white(rgba: Image.Image) -> Image.Image:
    background = Image.new("RGBA", rgba.size, _WHITE + (255,))
    composited = Image.alpha_composite(background, rgba)
    del background, rgba
    return composited.convert("RGB")


_STRIP_ROWS = 512  # rows converted at once: float temporaries stay ~ 512 x width x 4 bytes each


def _high_depth_to_rgb(image: Image.Image) -> Image.Image:
    """16-bit (or float) greyscale -> 8-bit: Pillow's own convert would clip instead of scale.
    Converted in strips of rows, so a huge 16-bit image never gets a full-size float copy."""
    source = np.asarray(image)
    unit_floats = image.mode == "F" and source.size > 0 and float(np.nanmax(source)) <= 1.0
    scale = 255.0 if unit_floats else (1.0 if image.mode == "F" else 1.0 / 257.0)  # 0..65535 -> 0..255
    grey = np.empty(source.shape, dtype=np.uint8)
    for start in range(0, source.shape[0], _STRIP_ROWS):
        strip = source[start : start + _STRIP_ROWS].astype(np.float32) * np.float32(scale)
        grey[start : start + _STRIP_ROWS] = np.clip(np.nan_to_num(strip), 0, 255).round()
    del source
    return Image.fromarray(grey).convert("RGB")


# Bytes per pixel of Pillow's own storage: one byte for 1, L and P, two for 16-bit greyscale, four for
# everything else (RGB is stored as four bytes too, LA as four).
_STORED_BYTES = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16L": 2, "I;16B": 2, "I;16N": 2}
_RGB_BYTES = 4
_STRIP_BYTES = 16  # float32 temporaries alive at once per pixel of a strip (_high_depth_to_rgb)
# What a decoder keeps beside the image until it is closed: Pillow's WebP plugin holds libwebp's
# decoder and the decoded RGBA frame as bytes (measured: 12 bytes per pixel for lossless files), the GIF
# plugin a frame and its predecessor; other decoders' buffers stay under one byte per pixel.
_DECODER_BYTES = {"WEBP": 12, "GIF": 2}
_SLACK = 1.05  # allocator rounding; tests/test_decode_budget.py measures the peak against this estimate
# Pillow keeps a pointer per row (plus one) beside every image's pixels: 8 bytes a row, twice the pixels of
# a one-pixel-wide RGB image (a 1 x 40,000,000 PNG held 320 MB of pointers per copy; issue 44).
_ROW_BYTES = 8


def decode_estimate_of(image: Image.Image) -> int:
    """Peak bytes that decoding ``image`` (opened, not loaded) to RGB here adds, from its header alone:
    the decoded pixels in Pillow's storage, the intermediates ``to_rgb`` keeps alive at once for its mode
    (an RGBA copy, the white background and the composite for transparency; a copy and the 8-bit result
    for 16-bit and float images), the RGB result, what the format's decoder holds, and every image's
    row pointers (what a tall, narrow image costs most)."""
    transparent = image.mode == "P" and "transparency" in image.info
    return decode_bytes_estimate(image.mode, image.size, image_format=image.format, transparency=transparent)


def decode_bytes_estimate(
    mode: str, size: tuple[int, int], *, image_format: str | None = None, transparency: bool = False
) -> int:
    """``decode_estimate_of`` from the mode, size, format and palette transparency of a header."""
    width, height = size
    stored = _STORED_BYTES.get(mode, 4)
    steps, images = _conversion_cost(mode, stored, transparency)
    per_pixel = stored + steps + _DECODER_BYTES.get(image_format or "", 1)
    strips = _STRIP_BYTES * min(height, _STRIP_ROWS) * width if mode in _HIGH_DEPTH_MODES else 0
    rows = _ROW_BYTES * (height + 1) * (1 + images)  # the decoded image's and each later image's
    return int(_SLACK * (width * height * per_pixel + strips + rows))


def _conversion_cost(mode: str, stored: int, transparency: bool) -> tuple[int, int]:
    """What ``to_rgb`` keeps alive at once beside the decoded image: bytes per pixel, and how many
    Pillow images (each with its row pointers) those bytes are."""
    if transparency or mode in _ALPHA_MODES:  # background, composite, and an RGBA copy or the RGB result
        images = 2 if mode == "RGBA" else 3
        return images * _RGB_BYTES, images
    if mode in _HIGH_DEPTH_MODES:  # the array copy, the 8-bit strip target (an L image), the RGB result
        return stored + 1 + _RGB_BYTES, 2
    return _RGB_BYTES, 1


def check_decode_budget(image: Image.Image, max_bytes: int | None) -> None:
    """Refuse, from the header, an image whose decoding would need more than ``max_bytes``."""
    if max_bytes is not None and (needed := decode_estimate_of(image)) > max_bytes:
        width, height = image.size
        raise DataError(
            f"decoding this {width}x{height} {image.mode} image would need about {needed >> 20} MB, over the "
            f"limit of {max_bytes >> 20} MB; send a smaller image"
        )
