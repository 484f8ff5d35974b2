"""What the Python API and the commands accept as data, images and models, turned into records,
vectors and embedders."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import select_split
from retrieval.indexing.exported_model.no_model import has_model, no_model_error
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.resolution import resolve_query_model
from retrieval.indexing.store.shared.index_directory.index_manifest import load_index_manifest

PathLike = str | Path
ImageLike = PathLike | Image.Image
Data = PathLike | Sequence[ImageRecord]
"""A dataset: any layout ``retrieval data`` reads, or a list of records."""
EMBED_BATCH = 32


def records_of(data: Data, split: str = "all") -> list[ImageRecord]:
    """The records of ``data`` in ``split`` (all, train, val or test)."""
    records = load_records(Path(data)) if isinstance(data, str | Path) else list(data)
    return select_split(records, split)


def query_embedder(index_dir: Path, model: Path | None = None, *, threads: int | None = None) -> OnnxEmbedder:
    """The embedder of an index's queries: ``model`` if given, else the index's own copy of its model."""
    manifest = load_index_manifest(index_dir)
    if not has_model(manifest.model):
        raise no_model_error()
    return OnnxEmbedder(resolve_query_model(index_dir, manifest.model_dir, model), threads=threads)


def embed_images(embedder: OnnxEmbedder, images: Sequence[ImageLike]) -> np.ndarray:
    """Embeddings of paths (read with the one decoder, an unreadable one is a DataError) and PIL images,
    a batch at a time."""
    parts = []
    for start in range(0, len(images), EMBED_BATCH):
        batch = images[start : start + EMBED_BATCH]
        parts.append(embedder.embed_images([i if isinstance(i, Image.Image) else open_rgb(Path(i)) for i in batch]))
    return np.concatenate(parts)
