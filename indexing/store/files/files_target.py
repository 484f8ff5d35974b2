"""``FilesTarget``: writing a new index of the files backend (faiss + SQLite in the index directory).

Every file of a fresh index (generation 0: the base segment, ``items.sqlite``, ``model/``, the
manifest last) is written in a staging directory and swapped in (``shared.index_dir``).
``retrieval index build`` and ``index merge`` write through it unless ``--backend milvus``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retrieval.indexing.common.artifact_names import INDEX_MODEL_SUBDIR, ITEMS_DB_NAME
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.exported_model.model_manifest import model_files_sha256
from retrieval.indexing.exported_model.no_model import has_model
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.postprocess import augment_database
from retrieval.indexing.search.postprocess_params import IndexPostprocess
from retrieval.indexing.store.files.faiss_kinds import IndexKind, build_binary_index, build_float_index
from retrieval.indexing.store.files.raw_vectors import write_raw
from retrieval.indexing.store.files.segment_storage.segment_files import write_embeddings, write_faiss_files
from retrieval.indexing.store.shared.index_directory.index_dir import (
    IndexContents,
    check_out_dir,
    copy_model,
    fresh_manifest,
    staged_index_dir,
)
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest, save_index_manifest
from retrieval.indexing.store.shared.items.items_db import ItemsDb


@dataclass(frozen=True)
class FilesTarget:
    """The files backend as a place to write an index: the directory itself; ``postprocess`` goes into the
    manifest, and with its ``dba`` the vectors are augmented (``index build --dba N``)."""

    postprocess: IndexPostprocess = field(default_factory=IndexPostprocess)

    @classmethod
    def of(cls, uri: str | None, collection: str | None, out_dir: Path) -> FilesTarget:
        """From the CLI options (``--backend files`` takes no Milvus options)."""
        if uri or collection:
            raise ConfigError("--milvus-uri and --collection need --backend milvus")
        return cls()

    def write(
        self, out_dir: Path, contents: IndexContents[tuple[IndexKind, IndexKind]], *, progress: bool = False
    ) -> IndexManifest:
        """Write all files in a staging directory, then swap it in place of ``out_dir``."""
        check_out_dir(out_dir)
        with staged_index_dir(out_dir) as staging:
            manifest = write_index_files(staging, contents, progress=progress, postprocess=self.postprocess)
        return manifest


def describe(manifest: IndexManifest) -> str:
    """Where the items of a files index are, as the build and merge commands print it."""
    return f"float {manifest.float_kind}, binary {manifest.binary_kind}"


def summary(manifest: IndexManifest) -> str:
    """The backend row of ``retrieval index info``."""
    return "files (faiss + SQLite in this directory)"


def write_index_files(
    index_dir: Path,
    contents: IndexContents[tuple[IndexKind, IndexKind]],
    *,
    progress: bool = False,
    postprocess: IndexPostprocess | None = None,
) -> IndexManifest:
    """Every file of a fresh index (generation 0) in ``index_dir``; the manifest is written last. With
    ``postprocess.dba`` the stored and indexed vectors are the augmented ones, the raw ones go to ``raw/``."""
    model, records, kinds = contents.model, contents.records, contents.kinds
    index_dir.mkdir(parents=True, exist_ok=False)
    postprocess = postprocess or IndexPostprocess()
    raw = np.asarray(contents.embeddings, dtype=np.float32)
    vectors = augment_database(raw, postprocess.dba).vectors if postprocess.dba else raw
    write_embeddings(index_dir, vectors)
    db = ItemsDb.create(index_dir / ITEMS_DB_NAME)
    try:
        with db.transaction():
            ids = np.asarray(db.insert(records, range(len(records))), dtype=np.int64)
        num_labels = len(db.labels())
    finally:
        db.close()
    if postprocess.dba:
        write_raw(index_dir, 0, ids, raw)
    threshold = model.manifest.binarization_threshold
    float_index = build_float_index(kinds[0], vectors, ids, progress=progress)
    binary_index = build_binary_index(kinds[1], binarize(vectors, threshold), ids, vectors.shape[1], progress=progress)
    write_faiss_files(index_dir, float_index, binary_index)
    names = (kinds[0].name, kinds[1].name)
    manifest = fresh_manifest(model, dim=vectors.shape[1], kinds=names, count=len(ids), num_labels=num_labels)
    model_files = None  # an index built from vectors alone has no model to copy
    if has_model(model.manifest):
        copy_model(model, index_dir / INDEX_MODEL_SUBDIR)
        model_files = model_files_sha256(index_dir / INDEX_MODEL_SUBDIR, model.manifest)
    manifest = manifest.model_copy(update={"postprocess": postprocess, "model_files_sha256": model_files})
    return save_index_manifest(index_dir, manifest)
