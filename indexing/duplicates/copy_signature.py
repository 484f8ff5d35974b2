"""A copy-specific signature of an image's pixels: what ``search.copy_verifier`` checks a candidate pair with.

An ImageNet embedding puts two distinct photos of one car model close together; a copy (re-encoded,
resized, slightly cropped or recoloured) is a much stronger relation: its pixels are the original's. The
signature is the image in grayscale at ``SIZE`` x ``SIZE`` pixels, each thumbnail centred and scaled to
unit norm (so a brightness, contrast or saturation change hardly moves it), taken of the whole image and of
its centre with ``CROPS`` cut off each side (so that a slightly cropped copy meets its original at a
similar framing). The similarity of two signatures is the best normalised cross-correlation over the
framings: 1 for the same pixels, around 0.4 for two photos of one car model, above 0.93 for the copies the
calibration makes. No torch: Pillow and numpy only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.image_io import open_rgb

SIZE = 32
CROPS = (0.0, 0.025, 0.05)
"""The share of each side cut off for the framings compared (the calibration's crops cut 1-4 %)."""
DECODE_SIZE = (4 * SIZE, 4 * SIZE)
"""A JPEG is decoded at the smallest scale that still covers this (a draft), enough for the thumbnails."""


def copy_signature(image: Image.Image) -> np.ndarray:
    """``image``'s signature: one unit-norm, zero-mean thumbnail per framing in ``CROPS``, shape
    (len(CROPS), SIZE * SIZE), float32."""
    gray = image.convert("L")
    width, height = gray.size
    rows = []
    for cut in CROPS:
        box = (width * cut, height * cut, width * (1 - cut), height * (1 - cut))
        pixels = np.asarray(gray.resize((SIZE, SIZE), Image.Resampling.BOX, box=box), np.float32).ravel()
        pixels -= pixels.mean()
        rows.append(pixels / max(float(np.linalg.norm(pixels)), 1e-6))
    return np.stack(rows)


def path_signature(path: Path) -> np.ndarray | None:
    """The signature of the image at ``path``, or None when it cannot be read."""
    try:
        return copy_signature(open_rgb(Path(path), reduce_to=DECODE_SIZE))
    except (DataError, OSError):
        return None


def signature_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """The best normalised cross-correlation of two signatures over their framings, in [-1, 1]."""
    return float(np.max(a @ b.T))
