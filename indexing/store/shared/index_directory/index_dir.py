"""Writing an index directory, whichever backend holds its items: the checks, the model copy and the swap.

A new directory is written completely in a hidden staging directory beside ``out_dir`` and only
then swapped in under the writer lock, so a crash or error mid-build leaves a previous index at
``out_dir`` intact and loadable (the swap is two renames; the window between them is microseconds,
and a crash there leaves the old index as ``.NAME.old-PID``).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from retrieval.indexing.common.artifact_names import INDEX_MANIFEST_NAME, MODEL_MANIFEST_NAME
from retrieval.indexing.common.atomic_write import atomic_write_bytes, remove_dead_writers_leftovers, replace_directory
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest, utc_now
from retrieval.indexing.store.shared.index_directory.write_lock import exclusive_writer


class IndexedModel(Protocol):
    """What writing an index needs of its model: an ``OnnxEmbedder``, or a merge's shard model copy."""

    @property
    def model_sha256(self) -> str: ...

    @property
    def manifest(self) -> ModelManifest: ...

    @property
    def export_dir(self) -> Path: ...


KindsT = TypeVar("KindsT", covariant=True)


@dataclass(frozen=True)
class IndexContents(Generic[KindsT]):
    """What a new index directory is written from, whichever backend holds its items: the model, the
    items' records and their (n, d) embeddings (row i is record i), and the index kinds (float, binary)."""

    model: IndexedModel
    records: Sequence[ImageRecord]
    embeddings: np.ndarray
    kinds: KindsT


def check_out_dir(out_dir: Path) -> None:
    """Refuse to replace a non-empty directory that is not an index (it could be the user's photos)."""
    if out_dir.exists() and (
        not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / INDEX_MANIFEST_NAME).exists())
    ):
        raise ConfigError(f"{out_dir} exists and is not an index directory; choose a new or empty --out")


def copy_model(model: IndexedModel, target: Path) -> None:
    """Copy model.onnx + model.json (and text.onnx + tokenizer.json of a model with a text side) so the
    index directory alone can embed queries, images and texts."""
    source = model.export_dir
    for name in model_file_names(model.manifest):
        atomic_write_bytes(target / name, (source / name).read_bytes())


def model_file_names(manifest: ModelManifest) -> tuple[str, ...]:
    """The files of an export that an index copies: the image model, its model.json, its text side's."""
    text = (manifest.text.onnx_file, manifest.text.tokenizer_file) if manifest.text is not None else ()
    return (manifest.onnx_file, MODEL_MANIFEST_NAME, *text)


@contextmanager
def staged_index_dir(out_dir: Path) -> Iterator[Path]:
    """A staging path beside ``out_dir`` (not yet created) for the caller to fill; swapped in place of
    ``out_dir`` under the writer lock (no add or remove of another process runs into the swap) when
    the block ends without an error, and removed in any case."""
    remove_dead_writers_leftovers(out_dir)
    staging = out_dir.parent / f".{out_dir.name}.building-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        yield staging
        with exclusive_writer(out_dir):
            replace_directory(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def fresh_manifest(
    model: IndexedModel, *, dim: int, kinds: tuple[str, str], count: int, num_labels: int, **backend: Any
) -> IndexManifest:
    """The manifest of a newly written index (generation 0) of ``count`` items, whichever backend holds
    them: ``kinds`` names the float and binary kinds, ``backend`` the backend's own fields."""
    now = utc_now()
    return IndexManifest(
        model_sha256=model.model_sha256,
        model=model.manifest,
        model_dir=str(model.export_dir.resolve()),
        dim=dim,
        bits=dim,
        binarization_threshold=model.manifest.binarization_threshold,
        float_kind=kinds[0],
        binary_kind=kinds[1],
        count=count,
        num_labels=num_labels,
        generation=0,
        created_at=now,
        build_id=uuid.uuid4().hex,
        updated_at=now,
        **backend,
    )
