"""``retrieval index build --backend milvus``: the items into a Milvus collection, the directory beside it.

The collection is (re)created and filled first; then the index directory (``manifest.json`` naming
the backend, URI and collection, plus ``model/``) is written in a staging directory and swapped in,
as the files backend does. Rebuilding into the collection an index directory already names replaces
that index's items at once: build into a new ``--collection`` to keep serving the old one meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from retrieval.indexing.common.artifact_names import INDEX_MODEL_SUBDIR
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.store.milvus.milvus_client import (
    TIMEOUT_S,
    check_collection_name,
    connect,
    create_collections,
    meta_collection,
    milvus_call,
    normalized_uri,
)
from retrieval.indexing.store.milvus.milvus_rows import item_rows, save_next_id
from retrieval.indexing.store.shared.index_directory.index_dir import (
    IndexContents,
    IndexedModel,
    check_out_dir,
    copy_model,
    fresh_manifest,
    staged_index_dir,
)
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest, save_index_manifest

INSERT_BATCH = 512  # rows per insert: 512 x 2048-d float32 is 4 MiB, far below gRPC's 64 MiB message limit
FLOAT_KIND, BINARY_KIND = "milvus:FLAT", "milvus:BIN_FLAT"


@dataclass(frozen=True)
class MilvusTarget:
    """Where ``--backend milvus`` writes: a server URL or a milvus-lite ``.db`` file, and a collection."""

    uri: str
    collection: str

    @classmethod
    def of(cls, uri: str | None, collection: str | None, out_dir: Path) -> MilvusTarget:
        """From the CLI options; the collection defaults to ``retrieval_`` + the directory's name."""
        if not uri:
            raise ConfigError("--backend milvus needs --milvus-uri (http://HOST:19530, or a file such as ./index.db)")
        name = collection or "retrieval_" + "".join(c if c.isalnum() else "_" for c in Path(out_dir).resolve().name)
        return cls(normalized_uri(uri), check_collection_name(name))

    def write(self, out_dir: Path, contents: IndexContents[object], *, progress: bool = False) -> IndexManifest:
        """Fill the collection, then write and swap in the index directory that names it (the faiss
        ``contents.kinds`` do not apply: Milvus searches FLAT and BIN_FLAT)."""
        check_out_dir(out_dir)
        model, records = contents.model, contents.records
        vectors = np.asarray(contents.embeddings, dtype=np.float32)
        self._fill(model, records, vectors)
        manifest = _manifest(model, records, vectors.shape[1], self)
        with staged_index_dir(out_dir) as staging:
            staging.mkdir(parents=True)
            copy_model(model, staging / INDEX_MODEL_SUBDIR)
            save_index_manifest(staging, manifest)
        return manifest

    def _fill(self, model: IndexedModel, records: Sequence[ImageRecord], vectors: np.ndarray) -> None:
        """(Re)create the collection and insert the items in batches, with ids 1..n."""
        threshold = model.manifest.binarization_threshold
        client = connect(self.uri)
        try:
            milvus_call(self.uri, "create the collection", lambda: _create(client, self, vectors.shape[1]))
            for start in range(0, len(records), INSERT_BATCH):
                end = min(start + INSERT_BATCH, len(records))
                rows = item_rows(records[start:end], vectors[start:end], range(start + 1, end + 1), threshold)
                milvus_call(self.uri, "insert", partial(client.insert, self.collection, data=rows, timeout=TIMEOUT_S))
            save_next_id(client, meta_collection(self.collection), self.uri, len(records) + 1)
        finally:
            client.close()


def describe(manifest: IndexManifest) -> str:
    """Where the items of a Milvus index are, as the build and merge commands print it."""
    return f"Milvus collection {manifest.milvus_collection} at {manifest.milvus_uri}"


def summary(manifest: IndexManifest) -> str:
    """The backend row of ``retrieval index info``."""
    return f"milvus: collection {manifest.milvus_collection} at {manifest.milvus_uri} (items: count at build)"


def _create(client: object, target: MilvusTarget, dim: int) -> None:
    create_collections(client, target.collection, dim=dim, bits=dim)


def _manifest(model: IndexedModel, records: Sequence[ImageRecord], dim: int, target: MilvusTarget) -> IndexManifest:
    return fresh_manifest(
        model,
        dim=dim,
        kinds=(FLOAT_KIND, BINARY_KIND),
        count=len(records),
        num_labels=len({record.label for record in records}),
        backend="milvus",
        milvus_uri=target.uri,
        milvus_collection=target.collection,
    )
