"""``retrieval index build --backend milvus``: the items into a Milvus collection, the directory beside it.

The collection is (re)created and filled first; then the index directory (``manifest.json`` naming
the backend, URI and collection, plus ``model/``) is written in a staging directory and swapped in,
as the files backend does. Rebuilding into the collection an index directory already names replaces
that index's items at once: build into a new ``--collection`` to keep serving the old one meanwhile.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retrieval.indexing.common.artifact_names import INDEX_MODEL_SUBDIR
from retrieval.indexing.common.atomic_write import remove_dead_writers_leftovers, replace_directory
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
from retrieval.indexing.store.shared.manifest import IndexManifest, save_index_manifest, utc_now
from retrieval.indexing.store.shared.write_lock import exclusive_writer

if TYPE_CHECKING:
    from retrieval.indexing.store.build.builder import IndexedModel  # builder imports this module

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


def write_milvus_index(
    out_dir: Path,
    embedder: IndexedModel,
    records: Sequence[ImageRecord],
    embeddings: np.ndarray,
    target: MilvusTarget,
) -> IndexManifest:
    """Fill the collection, then write and swap in the index directory that names it."""
    from retrieval.indexing.store.build.builder import check_out_dir, copy_model  # builder dispatches here

    check_out_dir(out_dir)
    vectors = np.asarray(embeddings, dtype=np.float32)
    threshold = embedder.manifest.binarization_threshold
    client = connect(target.uri)
    try:
        milvus_call(target.uri, "create the collection", lambda: _create(client, target, vectors.shape[1]))
        for start in range(0, len(records), INSERT_BATCH):
            end = min(start + INSERT_BATCH, len(records))
            rows = item_rows(records[start:end], vectors[start:end], range(start + 1, end + 1), threshold)
            insert = partial(client.insert, target.collection, data=rows, timeout=TIMEOUT_S)
            milvus_call(target.uri, "insert", insert)
        save_next_id(client, meta_collection(target.collection), target.uri, len(records) + 1)
    finally:
        client.close()
    manifest = _manifest(embedder, records, vectors.shape[1], target)
    remove_dead_writers_leftovers(out_dir)
    staging = out_dir.parent / f".{out_dir.name}.building-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir(parents=True)
        copy_model(embedder, staging / INDEX_MODEL_SUBDIR)
        save_index_manifest(staging, manifest)
        with exclusive_writer(out_dir):
            replace_directory(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def _create(client: object, target: MilvusTarget, dim: int) -> None:
    create_collections(client, target.collection, dim=dim, bits=dim)


def _manifest(embedder: IndexedModel, records: Sequence[ImageRecord], dim: int, target: MilvusTarget) -> IndexManifest:
    now = utc_now()
    return IndexManifest(
        model_sha256=embedder.model_sha256,
        model=embedder.manifest,
        model_dir=str(embedder.export_dir.resolve()),
        dim=dim,
        bits=dim,
        binarization_threshold=embedder.manifest.binarization_threshold,
        float_kind=FLOAT_KIND,
        binary_kind=BINARY_KIND,
        count=len(records),
        num_labels=len({record.label for record in records}),
        generation=0,
        created_at=now,
        build_id=uuid.uuid4().hex,
        updated_at=now,
        backend="milvus",
        milvus_uri=target.uri,
        milvus_collection=target.collection,
    )
