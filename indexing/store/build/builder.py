"""Build an index from a model and a list of image records: embed them, then write through a target.

The target is where the items go (``backends.index_target``: the files backend's directory by
default, or a Milvus collection); either way the index directory is written in a staging directory
beside ``out_dir`` and swapped in (``shared.index_dir``), so a crash or error mid-build leaves a
previous index at ``out_dir`` intact and loadable.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder, embed_records
from retrieval.indexing.exported_model.resolution import resolve_export_dir
from retrieval.indexing.search.postprocess_params import IndexPostprocess
from retrieval.indexing.store.backends import IndexTarget, backend_of
from retrieval.indexing.store.files.faiss_kinds import IndexKind, binary_kind, float_kind
from retrieval.indexing.store.files.files_target import FilesTarget
from retrieval.indexing.store.shared.index_directory.index_dir import IndexContents, IndexedModel, check_out_dir
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest
from retrieval.indexing.store.shared.store_checks import validate_records


@dataclass
class BuildReport:
    """What ``build_index`` did; ``failures`` are the images that could not be read and were skipped;
    ``storage`` says where the items are (the kinds, or the Milvus collection)."""

    index_dir: Path
    count: int
    num_labels: int
    float_kind: str
    binary_kind: str
    model_sha256: str
    embed_seconds: float
    total_seconds: float
    failures: list[tuple[Path, str]] = field(default_factory=list)
    storage: str = ""


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
    target: IndexTarget | None = None,
    postprocess: IndexPostprocess | None = None,
) -> BuildReport:
    """Embed ``records`` with the model and write a float + binary index directory at ``out_dir``
    (with a ``MilvusTarget``: the items into that Milvus collection, the directory naming it);
    ``postprocess``: recorded in the manifest, and with its ``dba`` the vectors are augmented."""
    started = time.perf_counter()
    target = with_postprocess(target, postprocess)
    kinds = index_kinds(float_kind, binary_kind)
    if not records:
        raise DataError("the gallery is empty; point --data at a folder or list with at least one image")
    validate_records(records)
    check_out_dir(Path(out_dir))
    embedder = OnnxEmbedder(resolve_export_dir(model_dir), threads=threads)
    kept, embeddings, failures = embed_records(embedder, records, batch_size=batch_size, progress=progress)
    embed_seconds = time.perf_counter() - started
    built = Built(embedder, kept, embeddings, embed_seconds, started, failures)
    return write_built(Path(out_dir), built, kinds, progress=progress, target=target)


@dataclass(frozen=True)
class Built:
    """Items and their vectors, ready to be written: embedded from images (``build_index``) or read from a
    vector file (``index build --vectors``, whose ``model`` is a ``NoModel``)."""

    model: IndexedModel
    records: Sequence[ImageRecord]
    vectors: np.ndarray
    embed_seconds: float
    started: float
    failures: list[tuple[Path, str]] = field(default_factory=list)


def write_built(
    out_dir: Path,
    built: Built,
    kinds: tuple[IndexKind, IndexKind],
    *,
    progress: bool = False,
    target: IndexTarget | None = None,
) -> BuildReport:
    """Write the index of ``built`` through ``target`` and report it."""
    manifest = write_index(out_dir, built.model, built.records, built.vectors, kinds, progress=progress, target=target)
    return BuildReport(
        out_dir,
        manifest.count,
        manifest.num_labels,
        kinds[0].name,
        kinds[1].name,
        built.model.model_sha256,
        built.embed_seconds,
        time.perf_counter() - built.started,
        list(built.failures),
        backend_of(manifest).describe(manifest),
    )


def with_postprocess(target: IndexTarget | None, postprocess: IndexPostprocess | None) -> IndexTarget | None:
    """The target that writes ``postprocess`` into the index: the files backend's (which keeps a DBA index's
    raw vectors beside the augmented ones); a Milvus collection takes neither."""
    if postprocess is None:
        return target
    if target is None or isinstance(target, FilesTarget):
        return FilesTarget(postprocess=postprocess)
    raise ConfigError(
        "--dba and --postprocess-params need the files backend (--backend files): it keeps raw and augmented vectors"
    )


def index_kinds(float_name: str, binary_name: str) -> tuple[IndexKind, IndexKind]:
    """The float and binary faiss kinds named on the command line (a ConfigError lists the known ones)."""
    return float_kind(float_name), binary_kind(binary_name)


def write_index(
    out_dir: Path,
    model: IndexedModel,
    records: Sequence[ImageRecord],
    embeddings: np.ndarray,
    kinds: tuple[IndexKind, IndexKind],
    *,
    progress: bool = False,
    target: IndexTarget | None = None,
) -> IndexManifest:
    """Write the index of ``records`` through ``target`` (the files backend when None)."""
    chosen = target if target is not None else FilesTarget()
    return chosen.write(out_dir, IndexContents(model, records, embeddings, kinds), progress=progress)
