"""Embeddings with their items: a dataset embedded with an exported model, or an index's stored ones
(``embed``, the Python API; ``retrieval embed`` writes the same table with ``write_embedding_table``)."""

from __future__ import annotations

import warnings
from pathlib import Path

from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.exported_model.embedding_files import DatasetEmbedding, EmbeddingTable, embedding_table
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.resolution import resolve_export_dir
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.stored_embeddings import stored_embedding_table
from retrieval.indexing.usecases.inputs import EMBED_BATCH, Data, PathLike, records_of


def embed(
    model: PathLike | None = None,
    data: Data | None = None,
    *,
    index: PathLike | None = None,
    split: str = "all",
    batch_size: int = EMBED_BATCH,
    progress: bool = True,
) -> EmbeddingTable:
    """``retrieval embed``: a dataset's ``split`` embedded with an export or run directory (ids are the
    images' positions in the split; unreadable images are skipped with a warning), or an index's stored
    embeddings with its item ids (``index``). ``write_embedding_table`` writes the table as the command does."""
    if index is not None:
        return index_embeddings(Path(index))
    if model is None or data is None:
        raise ConfigError("embed() needs model and data (a model on a dataset), or index (an index's embeddings)")
    result = dataset_embeddings(Path(model), data, split=split, batch_size=batch_size, progress=progress)
    for path, reason in result.failures:
        warnings.warn(f"skipped {path}: {reason}", stacklevel=2)
    return result.table


def index_embeddings(index: Path) -> EmbeddingTable:
    """The stored embeddings of every item of an index (either backend), with its item ids."""
    with open_store(index) as store:
        return stored_embedding_table(store)


def dataset_embeddings(
    model: Path,
    data: Data,
    *,
    split: str = "all",
    batch_size: int = EMBED_BATCH,
    threads: int | None = None,
    progress: bool = True,
) -> DatasetEmbedding:
    """The ``split`` of ``data`` embedded with ``model``: ids are the images' positions in the split
    (sorted by label, then path); unreadable images are skipped and listed in ``failures``."""
    records = records_of(data, split)
    if not records:
        named = data if isinstance(data, str | Path) else "the given records"
        raise DataError(f"the {split} split of {named} holds no images")
    embedder = OnnxEmbedder(resolve_export_dir(model), threads=threads)
    return embedding_table(embedder, records, batch_size=batch_size, progress=progress)
