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


def open_rgb(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Open ``path`` as an upright, fully loaded 8-bit RGB image.

    Raises ``DataError("cannot read image <path>: <reason>")`` for missing, corrupt,
    truncated or non-image files and for images with more than ``max_pixels`` pixels.
    """
    return _read(lambda: open(path, "rb"), str(path), max_pixels)


#: The only decoders an upload may reach, whatever its declared type says and whatever plugins
#: are installed (no EPS -> Ghostscript, no exotic formats): JPEG (its opener also reads MPO), PNG, WebP,
#: GIF, BMP and TIFF, the types the service accepts.
UPLOAD_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF")


def open_rgb_bytes(
    data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS, name: str = "<upload>", max_decode_bytes: int | None = None
) -> Image.Image:
    """Like :func:`open_rgb` for an in-memory file (an HTTP upload); ``name`` labels errors.
    Only the ``UPLOAD_FORMATS`` decoders are tried: decoding follows these, not the content.
    ``max_decode_bytes`` refuses, from the header, an image whose decoding would need more memory."""
    return _read(lambda: io.BytesIO(data), name, max_pixels, UPLOAD_FORMATS, max_decode_bytes)


def _read(
    opener: Callable[[], IO[bytes]],
    name: str,
    max_pixels: int,
    formats: tuple[str, ...] | None = None,
    max_decode_bytes: int | None = None,
) -> Image.Image:
    try:
        with opener() as handle, Image.open(handle, formats=formats) as image:
            check_pixel_limit(image.size, max_pixels)
            check_decode_budget(image.mode, image.size, max_decode_bytes)
            image.load()
            return to_rgb(ImageOps.exif_transpose(image))
    except DECODE_ERRORS as error:
        raise DataError(f"cannot read image {name}: {decode_failure_reason(error)}") from None


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
    """Convert any Pillow mode to 8-bit RGB; transparency is composited on white."""
    if image.mode == "RGB":
        return image.copy()
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode in _ALPHA_MODES:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, _WHITE + (255,))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if image.mode in _HIGH_DEPTH_MODES:
        return _high_depth_to_rgb(image)
    return image.convert("RGB")


_STRIP_ROWS = 512  # rows converted at once: float temporaries stay ~ 512 x width x 4 bytes


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
    return Image.fromarray(grey).convert("RGB")


def decode_bytes_estimate(mode: str, size: tuple[int, int]) -> int:
    """Peak bytes of decoding an image of ``mode`` and ``size`` to RGB here, from its header alone:
    the decoded pixels, a same-size RGBA or greyscale intermediate, and the RGB result."""
    try:
        decoded = len(Image.new(mode, (1, 1)).tobytes())
    except (ValueError, OSError):
        decoded = 4
    return size[0] * size[1] * (decoded + 4 + 3)


def check_decode_budget(mode: str, size: tuple[int, int], max_bytes: int | None) -> None:
    if max_bytes is not None and (needed := decode_bytes_estimate(mode, size)) > max_bytes:
        raise DataError(
            f"decoding this {size[0]}x{size[1]} {mode} image would need about {needed >> 20} MB, over the "
            f"limit of {max_bytes >> 20} MB; send a smaller image"
        )
