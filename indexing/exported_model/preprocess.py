"""The eval transform of ``model.json`` as pure NumPy/Pillow functions (no torch).

It reproduces torchvision's ``Resize(resize) -> CenterCrop(crop) -> ToTensor ->
Normalize(mean, std)`` on PIL images step by step: torchvision itself calls
``PIL.Image.resize(..., BILINEAR)`` (Pillow's bilinear filter is antialiased when
reducing) with the same output size rule, and crops at the same rounded offsets, so on
real photos the two agree to float32 rounding (see ``tests/test_preprocess.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from PIL import Image

from retrieval.indexing.exported_model.model_manifest import Preprocessing


def resized_size(width: int, height: int, shorter_side: int) -> tuple[int, int]:
    """(width, height) after resizing the shorter side to ``shorter_side`` (torchvision's rule).

    The longer side is truncated, not rounded: ``int(shorter_side * long / short)``.
    """
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = shorter_side, int(shorter_side * long / short)
    return (new_short, new_long) if width <= height else (new_long, new_short)


def center_crop_box(width: int, height: int, crop: int) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of torchvision's centre crop; may extend past the image."""
    top = int(round((height - crop) / 2.0))
    left = int(round((width - crop) / 2.0))
    return left, top, left + crop, top + crop


def _pad_to_crop(img: Image.Image, crop: int) -> Image.Image:
    """Zero-pad an image smaller than the crop the way torchvision's CenterCrop does."""
    width, height = img.size
    if width >= crop and height >= crop:
        return img
    left = (crop - width) // 2 if crop > width else 0
    top = (crop - height) // 2 if crop > height else 0
    padded = Image.new("RGB", (max(width, crop), max(height, crop)), (0, 0, 0))
    padded.paste(img, (left, top))
    return padded


FULL_RESIZE_MAX_PIXELS = 4_000_000
"""The largest resized image made whole (16 MB as RGB), as torchvision does. A more elongated image (a
4,000,000 x 10 PNG would become 102,400,000 x 256 pixels, 100 GB) has only the region that survives the
centre crop resized, so no step from the decoded image to the model's input grows past the decode budget."""


def draft_size(prep: Preprocessing) -> tuple[int, int]:
    """The size a JPEG may be decoded down to before this transform (``open_rgb``'s ``reduce_to``: Pillow's
    draft decodes at 1/2, 1/4 or 1/8 scale while both sides stay at least this): the shorter side still
    covers ``resize``, so the resize only shrinks. Pixels differ from a full decode's (the DCT scaling
    averages blocks; bench/bench_query_decode.py measures what it does to the embeddings and MAP@R)."""
    return prep.resize, prep.resize


def resize_and_crop(img: Image.Image, prep: Preprocessing, *, region_only: bool = False) -> Image.Image:
    """The geometric part of the transform: RGB image of ``crop`` x ``crop`` pixels. ``region_only``
    resizes only what the crop keeps (``_resize_crop_region``, the service's queries): about 40 % less CPU
    for a 500 x 375 photo, each pixel within one level of the whole resize's (torchvision's)."""
    if img.mode != "RGB":
        img = img.convert("RGB")
    width, height = resized_size(*img.size, prep.resize)
    if region_only or width * height > FULL_RESIZE_MAX_PIXELS:
        return _resize_crop_region(img, (width, height), prep.crop)
    img = img.resize((width, height), Image.Resampling.BILINEAR)
    img = _pad_to_crop(img, prep.crop)
    return img.crop(center_crop_box(*img.size, prep.crop))


def _resize_crop_region(img: Image.Image, resized: tuple[int, int], crop: int) -> Image.Image:
    """``resize -> pad -> centre crop`` without the resized image: Pillow resizes only the source region
    that maps to the crop (its filter still reads the pixels around it), so the result is at most
    ``crop`` x ``crop`` and equals the whole resize's crop but for float rounding (at most one level)."""
    (left, right, pad_x), (top, bottom, pad_y) = (_crop_span(size, crop) for size in resized)
    scale_x, scale_y = img.width / resized[0], img.height / resized[1]
    box = (left * scale_x, top * scale_y, right * scale_x, bottom * scale_y)
    region = img.resize((right - left, bottom - top), Image.Resampling.BILINEAR, box=box)
    if region.size == (crop, crop):
        return region
    padded = Image.new("RGB", (crop, crop), (0, 0, 0))
    padded.paste(region, (pad_x, pad_y))
    return padded


def _crop_span(size: int, crop: int) -> tuple[int, int, int]:
    """Along one axis of the resized image: the kept span (start, end) and where it lands in the crop,
    by ``_pad_to_crop`` (a short axis is padded, kept whole) and ``center_crop_box`` (a long one is cut)."""
    if size < crop:
        return 0, size, (crop - size) // 2
    start = int(round((size - crop) / 2.0))
    return start, start + crop, 0


@functools.lru_cache(maxsize=16)
def normalization_table(mean: tuple[float, float, float], std: tuple[float, float, float]) -> np.ndarray:
    """(3, 256) float32: ``(level / 255 - mean[c]) / std[c]`` for every uint8 level, in float32 arithmetic.

    The same element-wise float32 operations as torchvision's ``ToTensor -> Normalize`` (each is
    correctly rounded, so computing them once per level gives bit-identical values), done once.
    """
    levels = np.arange(256, dtype=np.float32)[:, None] / np.float32(255.0)
    table = (levels - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    table = np.ascontiguousarray(table.T)
    table.flags.writeable = False
    return table


def normalize_pixels(pixels: np.ndarray, prep: Preprocessing) -> np.ndarray:
    """uint8 HWC RGB pixels -> float32 CHW, scaled to [0, 1] then standardised per channel.

    A table look-up per channel (3x cheaper than the arithmetic on 224 x 224 pixels, same values).
    """
    table = normalization_table(prep.mean, prep.std)
    out = np.empty((3, *pixels.shape[:2]), dtype=np.float32)
    for channel in range(3):
        np.take(table[channel], pixels[:, :, channel], out=out[channel])
    return out


def preprocess_image(img: Image.Image, prep: Preprocessing, *, region_only: bool = False) -> np.ndarray:
    """One PIL image -> float32 array of shape (3, crop, crop), ready for the ONNX model."""
    return normalize_pixels(np.asarray(resize_and_crop(img, prep, region_only=region_only)), prep)


def preprocess_batch(images: Sequence[Image.Image], prep: Preprocessing) -> np.ndarray:
    """Several PIL images -> float32 array of shape (n, 3, crop, crop)."""
    if not images:
        return np.empty((0, 3, prep.crop, prep.crop), dtype=np.float32)
    return np.stack([preprocess_image(img, prep) for img in images])
