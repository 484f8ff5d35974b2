"""What the Python API and the commands accept as data, images, texts and models, turned into records,
vectors and embedders (``embed_texts``: the one way a text query becomes a vector, at every door)."""

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
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder, load_model_manifest
from retrieval.indexing.exported_model.resolution import resolve_query_model
from retrieval.indexing.exported_model.text_encoder import (
    TextEncoder,
    checked_texts,
    no_text_side_error,
    text_encoder_of,
)
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


def query_text_encoder(
    index_dir: Path, model: Path | None = None, *, threads: int | None = None
) -> tuple[TextEncoder, str]:
    """The text encoder of an index's text queries (``model``'s, else the index's own copy's) and the sha256
    of the image model it belongs to (the store checks it, as for images); the refusal when it has none."""
    manifest = load_index_manifest(index_dir)
    if not has_model(manifest.model):
        raise no_text_side_error(manifest.model)
    export_dir = resolve_query_model(index_dir, manifest.model_dir, model)
    model_manifest = load_model_manifest(export_dir)
    return text_encoder_of(export_dir, model_manifest, threads=threads), model_manifest.onnx_sha256


def embed_texts(encoder: TextEncoder, texts: Sequence[str]) -> np.ndarray:
    """The query vectors of ``texts`` (each with words in it, else a DataError), a batch at a time: what every
    door (the service, ``retrieval search --text``, ``search(texts=...)``, ``retrieval eval``) searches."""
    queries = checked_texts(texts)
    parts = [encoder.encode(queries[start : start + EMBED_BATCH]) for start in range(0, len(queries), EMBED_BATCH)]
    return np.concatenate(parts)
