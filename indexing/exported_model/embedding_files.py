"""Embeddings written out with what they belong to: item ids, image paths, labels and splits.

Two formats, chosen by the file name:

* ``FILE.parquet``: one row per image, columns ``id``, ``path``, ``label``, ``split`` and
  ``embedding`` (a fixed-size list of float32); the model's sha256 and the dimension are in the
  schema metadata. Needs pyarrow (``pip install 'retrieval[parquet]'``).
* ``FILE.npy``: the (n, d) float32 array, plus ``FILE.items.csv`` beside it with ``id``, ``path``,
  ``label``, ``split`` for row 0..n-1 (NumPy and the csv module read them back, no extra package).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.indexing.common.atomic_write import atomic_write_with
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.common.table_files import CSV, PARQUET, table_suffix, write_table
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder, embed_records

NPY = ".npy"
EMBEDDING_SUFFIXES = (PARQUET, NPY)
SIDECAR_SUFFIX = ".items" + CSV


@dataclass(frozen=True)
class EmbeddingTable:
    """Row i of ``embeddings`` (L2-normalised float32) is the image ``paths[i]`` with id ``ids[i]``."""

    ids: list[int]
    paths: list[str]
    labels: list[str]
    splits: list[str | None]
    embeddings: np.ndarray
    model_sha256: str

    def item_columns(self) -> dict[str, list]:
        return {"id": self.ids, "path": self.paths, "label": self.labels, "split": self.splits}


def check_embedding_path(out: Path) -> str:
    """The format of ``out`` (.parquet or .npy), checked before any image is embedded."""
    return table_suffix(out, EMBEDDING_SUFFIXES)


def sidecar_path(out: Path) -> Path:
    """``emb.npy`` -> ``emb.items.csv``."""
    return Path(out).with_suffix(SIDECAR_SUFFIX)


def write_embedding_table(out: Path, table: EmbeddingTable) -> list[Path]:
    """Write the table in the format ``out`` names; returns the files written."""
    out = Path(out)
    vectors = np.ascontiguousarray(table.embeddings, dtype=np.float32)
    if check_embedding_path(out) == PARQUET:
        metadata = {"model_sha256": table.model_sha256, "embedding_dim": str(vectors.shape[1])}
        write_table(out, {**table.item_columns(), "embedding": vectors}, metadata=metadata)
        return [out]

    def save(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.save(handle, vectors)

    atomic_write_with(out, save)
    write_table(sidecar_path(out), table.item_columns())
    return [out, sidecar_path(out)]


@dataclass(frozen=True)
class DatasetEmbedding:
    """``embedding_table``'s result: the table of the images that could be read, and those that could not."""

    table: EmbeddingTable
    failures: list[tuple[Path, str]]


def embedding_table(
    embedder: OnnxEmbedder, records: Sequence[ImageRecord], *, batch_size: int = 32, progress: bool = True
) -> DatasetEmbedding:
    """Embed ``records`` (``retrieval embed --model --data``, ``api.embed``); ids are their positions in
    ``records``, unreadable images are skipped and listed. DataError when none can be read."""
    if not records:
        raise DataError("there are no images to embed")
    kept, embeddings, failures = embed_records(embedder, records, batch_size=batch_size, progress=progress)
    position = {id(record): i for i, record in enumerate(records)}
    table = EmbeddingTable(
        ids=[position[id(record)] for record in kept],
        paths=[str(record.path) for record in kept],
        labels=[record.label for record in kept],
        splits=[record.split for record in kept],
        embeddings=embeddings,
        model_sha256=embedder.model_sha256,
    )
    return DatasetEmbedding(table, list(failures))
