"""An index's stored embeddings as an ``EmbeddingTable`` (``retrieval embed --index``, ``api.embed(index=...)``)."""

from __future__ import annotations

from retrieval.indexing.exported_model.embedding_files import EmbeddingTable
from retrieval.indexing.store.shared.store_protocol import Store


def stored_embedding_table(store: Store) -> EmbeddingTable:
    """The stored (float16 -> float32) embeddings of every item, with the item ids the index uses."""
    items = store.all_items()
    ids = [item.id for item in items]
    return EmbeddingTable(
        ids=ids,
        paths=[item.path for item in items],
        labels=[item.label for item in items],
        splits=[item.split for item in items],
        embeddings=store.embeddings_of(ids),
        model_sha256=store.manifest.model_sha256,
    )
