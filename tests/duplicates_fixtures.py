"""A generated gallery with planted copies of each kind, and the brute-force pairs to check against."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
from index_fixtures import make_gallery
from PIL import Image

from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.duplicates.copy_threshold_measure import synthetic_copies
from retrieval.indexing.exported_model.copy_threshold import COPY_KINDS
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder

EXACT_PLANTS = {  # planted copy -> its original: the same pixels
    "class_0/copy_exact.png": "class_0/img_0.png",  # within a class
    "class_4/copy_exact.bmp": "class_1/img_1.png",  # across classes and the split
}
NEAR_PLANTS = {  # planted copy -> its original: changed pixels
    "class_5/copy_jpeg.jpg": "class_2/img_2.png",  # re-encoded, across classes and the split
    "class_3/copy_crop.png": "class_3/img_3.png",  # slightly cropped, within a class
}


def planted_gallery(root: Path) -> Path:
    """The generated 6 x 5 gallery under ``root`` with the four planted copies."""
    make_gallery(root)
    shutil.copyfile(root / "class_0/img_0.png", root / "class_0/copy_exact.png")
    Image.open(root / "class_1/img_1.png").save(root / "class_4/copy_exact.bmp")
    Image.open(root / "class_2/img_2.png").convert("RGB").save(root / "class_5/copy_jpeg.jpg", quality=60)
    image = Image.open(root / "class_3/img_3.png")
    image.crop((2, 2, image.width - 2, image.height - 2)).save(root / "class_3/copy_crop.png")
    return root


def planted_threshold(model_dir: Path, root: Path) -> float:
    """A threshold just below the least similar planted near copy, so that every plant clears it."""
    embedder = OnnxEmbedder(model_dir)
    scores = []
    for copy, original in NEAR_PLANTS.items():
        a, b = embedder.embed_images([open_rgb(root / copy), open_rgb(root / original)])
        scores.append(float(a @ b))
    return min(scores) - 1e-4


def brute_force_pairs(model_dir: Path, root: Path, threshold: float) -> dict[tuple[str, str], float]:
    """(path, path) -> cosine of every pair of the dataset at or above ``threshold``, the paths in record order."""
    records = load_records(root)
    vectors = OnnxEmbedder(model_dir).embed_images([open_rgb(r.path) for r in records])
    cosine = vectors @ vectors.T
    rows, cols = np.nonzero(np.triu(cosine >= threshold, k=1))
    return {(str(records[a].path), str(records[b].path)): float(cosine[a, b]) for a, b in zip(rows, cols)}


def look_alike_photo(class_index: int, item: int, size: tuple[int, int] = (160, 120)) -> Image.Image:
    """A smooth photo-like image: its class's coarse layout (shared by every image of the class, as two photos
    of one car model in one pose share theirs) plus its own finer detail, so that two images of a class
    correlate about 0.7 and only a copy correlates near 1."""
    layout = np.random.default_rng(7000 + class_index).normal(0, 60, (4, 5, 3))
    detail = np.random.default_rng(9000 + 100 * class_index + item).normal(0, 40, (12, 16, 3))
    pixels = 128 + _smooth(layout, size) + _smooth(detail, size)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def _smooth(grid: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``grid`` (rows, cols, 3) resized smoothly to ``size`` (width, height)."""
    channels = [
        Image.fromarray(grid[..., c].astype(np.float32), mode="F").resize(size, Image.Resampling.BICUBIC)
        for c in range(3)
    ]
    return np.stack([np.asarray(channel) for channel in channels], axis=2)


def look_alike_dataset(
    root: Path, classes: int = 3, per_class: int = 4, copied: int = 1, seed: int = 0
) -> dict[str, str]:
    """An ImageFolder of ``look_alike_photo`` images under ``root``, the first ``copied`` of each class copied
    the four ways of the copy calibration (``synthetic_copies``) into the same class; copy -> its original."""
    rng = random.Random(seed)
    plants = {}
    for class_index in range(classes):
        folder = root / f"class_{class_index}"
        folder.mkdir(parents=True, exist_ok=True)
        for item in range(per_class):
            image = look_alike_photo(class_index, item)
            image.save(folder / f"img_{item}.png")
            if item < copied:
                for kind, copy in zip(COPY_KINDS, synthetic_copies(image, rng)):
                    copy.save(folder / f"copy_{item}_{kind}.png")
                    plants[f"class_{class_index}/copy_{item}_{kind}.png"] = f"class_{class_index}/img_{item}.png"
    return plants
