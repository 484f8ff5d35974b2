"""A generated gallery with planted copies of each kind, and the brute-force pairs to check against."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from index_fixtures import make_gallery
from PIL import Image

from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.data.sources import load_records
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
