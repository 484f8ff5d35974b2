"""``open_store(index_dir)``: the store of an index directory, whichever backend its manifest names.

``backend: files`` (faiss + SQLite in the directory) opens an ``IndexStore``; ``backend: milvus`` a
``MilvusStore`` over the collection the manifest names. Both offer the same interface (search with
kind/rerank/where, items, item, hits, add, remove, embeddings_of, count, ids, close, ...), so the
service and the commands open every index through this one function.
"""

from __future__ import annotations

from pathlib import Path

from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.milvus.milvus_store import MilvusStore
from retrieval.indexing.store.shared.manifest import load_index_manifest

Store = IndexStore | MilvusStore


def open_store(index_dir: Path, *, expected_model_sha256: str | None = None, force: bool = False) -> Store:
    """Open the index at ``index_dir`` (checking the query model as ``IndexStore.open`` does)."""
    manifest = load_index_manifest(Path(index_dir))
    opener = MilvusStore.open if manifest.backend == "milvus" else IndexStore.open
    return opener(Path(index_dir), expected_model_sha256=expected_model_sha256, force=force)
