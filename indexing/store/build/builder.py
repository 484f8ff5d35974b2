"""Build an index directory from a model and a list of image records.

The new directory is written completely in a hidden staging directory beside ``out_dir``
and only then swapped in, so a crash or error mid-build leaves a previous index at
``out_dir`` intact and loadable (the swap is two renames; the window between them is
microseconds, and a crash there leaves the old index as ``.NAME.old-PID``).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from retrieval.indexing.common.artifact_names import (
    INDEX_MANIFEST_NAME,
    INDEX_MODEL_SUBDIR,
    ITEMS_DB_NAME,
    MODEL_MANIFEST_NAME,
)
from retrieval.indexing.common.atomic_write import atomic_write_bytes, remove_dead_writers_leftovers, replace_directory
from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.model.manifest import ModelManifest
from retrieval.indexing.model.onnx_embedder import OnnxEmbedder, embed_records
from retrieval.indexing.model.resolution import resolve_export_dir
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.store.files.faiss_kinds import (
    IndexKind,
    binary_kind,
    build_binary_index,
    build_float_index,
    float_kind,
)
from retrieval.indexing.store.shared.items_db import ItemsDb
from retrieval.indexing.store.shared.manifest import IndexManifest, save_index_manifest, utc_now
from retrieval.indexing.store.milvus.milvus_build import MilvusTarget, write_milvus_index
from retrieval.indexing.store.files.segment_files import write_embeddings, write_faiss_files
from retrieval.indexing.store.shared.store_checks import validate_labels
from retrieval.indexing.store.shared.write_lock import exclusive_writer


@dataclass
class BuildReport:
    """What ``build_index`` did; ``failures`` are the images that could not be read and were skipped."""

    index_dir: Path
    count: int
    num_labels: int
    float_kind: str
    binary_kind: str
    model_sha256: str
    embed_seconds: float
    total_seconds: float
    failures: list[tuple[Path, str]] = field(default_factory=list)


def build_index(
    model_dir: Path,
    records: Sequence[ImageRecord],
    out_dir: Path,
    *,
    float_kind: str = "flat",
    binary_kind: str = "flat",
    batch_size: int = 32,
    threads: int | None = None,
    progress: bool = True,
    milvus: MilvusTarget | None = None,
) -> BuildReport:
    """Embed ``records`` with the model and write a float + binary index directory at ``out_dir``
    (with ``milvus``: the items into that Milvus collection, the directory naming it)."""
    started = time.perf_counter()
    kinds = _kinds(float_kind, binary_kind)
    if not records:
        raise DataError("the gallery is empty; point --data at a folder or list with at least one image")
    validate_labels(records)
    check_out_dir(Path(out_dir))
    embedder = OnnxEmbedder(resolve_export_dir(model_dir), threads=threads)
    kept, embeddings, failures = embed_records(embedder, records, batch_size=batch_size, progress=progress)
    embed_seconds = time.perf_counter() - started
    manifest = write_index(Path(out_dir), embedder, kept, embeddings, kinds, progress=progress, milvus=milvus)
    return BuildReport(
        Path(out_dir),
        manifest.count,
        manifest.num_labels,
        float_kind,
        binary_kind,
        embedder.model_sha256,
        embed_seconds,
        time.perf_counter() - started,
        failures,
    )


def _kinds(float_name: str, binary_name: str) -> tuple[IndexKind, IndexKind]:
    return float_kind(float_name), binary_kind(binary_name)


def check_out_dir(out_dir: Path) -> None:
    """Refuse to replace a non-empty directory that is not an index (it could be the user's photos)."""
    if out_dir.exists() and (
        not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / INDEX_MANIFEST_NAME).exists())
    ):
        raise ConfigError(f"{out_dir} exists and is not an index directory; choose a new or empty --out")


class IndexedModel(Protocol):
    """What writing an index needs of its model: an ``OnnxEmbedder``, or a merge's shard model copy."""

    @property
    def model_sha256(self) -> str: ...

    @property
    def manifest(self) -> ModelManifest: ...

    @property
    def export_dir(self) -> Path: ...


def write_index(
    out_dir: Path,
    embedder: IndexedModel,
    records: Sequence[ImageRecord],
    embeddings: np.ndarray,
    kinds: tuple[IndexKind, IndexKind],
    *,
    progress: bool = False,
    milvus: MilvusTarget | None = None,
) -> IndexManifest:
    """Write all files in a staging directory, then swap it in place of ``out_dir`` (with ``milvus``:
    the items into that collection, and the directory naming it; ``kinds`` then do not apply)."""
    if milvus is not None:
        return write_milvus_index(out_dir, embedder, records, embeddings, milvus)
    check_out_dir(out_dir)
    remove_dead_writers_leftovers(out_dir)
    staging = out_dir.parent / f".{out_dir.name}.building-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        manifest = write_index_files(staging, embedder, records, embeddings, kinds, progress=progress)
        with exclusive_writer(out_dir):  # no add/remove of another process runs into the swap
            replace_directory(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def write_index_files(
    index_dir: Path,
    embedder: IndexedModel,
    records: Sequence[ImageRecord],
    embeddings: np.ndarray,
    kinds: tuple[IndexKind, IndexKind],
    *,
    progress: bool = False,
) -> IndexManifest:
    """Every file of a fresh index (generation 0) in ``index_dir``; the manifest is written last."""
    index_dir.mkdir(parents=True, exist_ok=False)
    vectors = np.asarray(embeddings, dtype=np.float32)
    write_embeddings(index_dir, vectors)
    db = ItemsDb.create(index_dir / ITEMS_DB_NAME)
    try:
        with db.transaction():
            ids = np.asarray(db.insert(records, range(len(records))), dtype=np.int64)
        num_labels = len(db.labels())
    finally:
        db.close()
    threshold = embedder.manifest.binarization_threshold
    float_index = build_float_index(kinds[0], vectors, ids, progress=progress)
    binary_index = build_binary_index(kinds[1], binarize(vectors, threshold), ids, vectors.shape[1], progress=progress)
    write_faiss_files(index_dir, float_index, binary_index)
    copy_model(embedder, index_dir / INDEX_MODEL_SUBDIR)
    now = utc_now()
    manifest = IndexManifest(
        model_sha256=embedder.model_sha256,
        model=embedder.manifest,
        model_dir=str(embedder.export_dir.resolve()),
        dim=vectors.shape[1],
        bits=vectors.shape[1],
        binarization_threshold=threshold,
        float_kind=kinds[0].name,
        binary_kind=kinds[1].name,
        count=len(ids),
        num_labels=num_labels,
        generation=0,
        created_at=now,
        build_id=uuid.uuid4().hex,
        updated_at=now,
    )
    save_index_manifest(index_dir, manifest)
    return manifest


def copy_model(embedder: IndexedModel, target: Path) -> None:
    """Copy model.onnx + model.json so the index directory alone can embed queries."""
    source = embedder.export_dir
    for name in (embedder.manifest.onnx_file, MODEL_MANIFEST_NAME):
        atomic_write_bytes(target / name, (source / name).read_bytes())
