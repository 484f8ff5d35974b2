"""``retrieval index merge OUT SHARD...``: N shard directories -> one index directory.

The merged index equals one unsharded ``index build`` of the same listing: items are ordered by
their position in the whole listing (stored by each shard), so SQLite hands out the same ids in
the same order, and the faiss indexes are built from the same float32 vectors by the same
``write_index`` (staging directory + swap under the writer lock). Shards embedded by different
models, from different listings, with different shard counts or kinds, duplicated or missing,
are refused before anything is written.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from retrieval.indexing.common.artifact_names import (
    INDEX_MANIFEST_NAME,
    INDEX_MODEL_SUBDIR,
    ITEMS_DB_NAME,
    SHARD_EMBEDDINGS_NAME,
    SHARD_MANIFEST_NAME,
)
from retrieval.indexing.common.errors import ConfigError, DataError, IndexFormatError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.model_manifest import ModelManifest, file_sha256
from retrieval.indexing.exported_model.resolution import is_export_dir
from retrieval.indexing.store.backends import IndexTarget, backend_of
from retrieval.indexing.store.build.builder import index_kinds, write_index
from retrieval.indexing.store.build.shards import ShardManifest
from retrieval.indexing.store.shared.items.items_db import ItemsDb

REBUILD_SHARD = "rebuild it with `retrieval index build --shard I/N`"


@dataclass(frozen=True)
class ShardModel:
    """The model of merged shards, as ``write_index`` needs it (``shared.index_dir.IndexedModel``)."""

    model_sha256: str
    manifest: ModelManifest
    export_dir: Path


@dataclass
class MergeReport:
    index_dir: Path
    count: int
    num_labels: int
    shards: int
    failures: int
    model_sha256: str
    float_kind: str
    binary_kind: str
    seconds: float
    storage: str = ""  # where the items are (the kinds, or the Milvus collection)


def load_shard_manifest(shard_dir: Path) -> ShardManifest:
    """``shard.json`` of a shard directory, or an error saying what the directory is instead."""
    shard_dir = Path(shard_dir)
    path = shard_dir / SHARD_MANIFEST_NAME
    if not shard_dir.is_dir():
        raise ConfigError(f"shard directory {shard_dir} does not exist")
    if not path.is_file():
        what = "an index directory" if (shard_dir / INDEX_MANIFEST_NAME).is_file() else "not a shard directory"
        raise ConfigError(
            f"{shard_dir} is {what} (no {SHARD_MANIFEST_NAME}); shards are written by `retrieval index build --shard I/N`"
        )
    try:
        return ShardManifest.model_validate_json(path.read_bytes())
    except (ValidationError, ValueError) as error:
        raise IndexFormatError(f"{path} is corrupt ({str(error).splitlines()[0]}); {REBUILD_SHARD}") from None


def check_shards(dirs: Sequence[Path], manifests: Sequence[ShardManifest]) -> None:
    """All shards of ONE sharded build, each exactly once: the same model, listing, count and kinds."""
    if not manifests:
        raise ConfigError("no shards to merge; pass the N shard directories of `retrieval index build --shard I/N`")
    named = [f"{d} (shard {m.shard}/{m.shards})" for d, m in zip(dirs, manifests, strict=True)]
    _same("models (onnx sha256)", [m.model_sha256[:12] for m in manifests], named, "embed every shard with one --model")
    _same("shard counts N", [str(m.shards) for m in manifests], named, "pass the shards of one --shard I/N split")
    _same("listings of the data", [m.listing_sha256[:12] for m in manifests], named, "the gallery changed between shard jobs; rebuild every shard from one listing")  # fmt: skip
    _same("index kinds", [f"{m.float_kind}/{m.binary_kind}" for m in manifests], named, "build every shard with the same --float-kind/--binary-kind")  # fmt: skip
    seen: dict[int, Path] = {}
    for shard_dir, manifest in zip(dirs, manifests, strict=True):
        if manifest.shard in seen:
            raise ConfigError(
                f"shard {manifest.shard}/{manifest.shards} is given twice: {seen[manifest.shard]} and {shard_dir}"
            )
        seen[manifest.shard] = shard_dir
    total = manifests[0].shards
    missing = [f"{i}/{total}" for i in range(total) if i not in seen]
    if missing:
        raise ConfigError(
            f"{len(missing)} of {total} shards are missing ({', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}); "
            f"merge needs all {total}: build them with `retrieval index build --shard I/{total}`"
        )


def _same(what: str, values: Sequence[str], named: Sequence[str], hint: str) -> None:
    if len(set(values)) > 1:
        listed = "; ".join(f"{name}: {value}" for name, value in zip(named, values, strict=True))
        raise ConfigError(f"the shards differ in their {what} ({listed}); {hint}")


def read_shard(shard_dir: Path, manifest: ShardManifest) -> tuple[np.ndarray, list[ImageRecord], np.ndarray]:
    """(positions in the whole listing, records, float32 vectors) of one shard, in its row order."""
    db = ItemsDb.open(Path(shard_dir) / ITEMS_DB_NAME)
    try:
        items = db.all_items()  # by id: the order the shard embedded them, i.e. its vector rows
    finally:
        db.close()
    path = Path(shard_dir) / SHARD_EMBEDDINGS_NAME
    try:
        vectors = np.load(path, mmap_mode="r")
    except (OSError, ValueError, EOFError) as error:
        raise IndexFormatError(f"{path} is missing or corrupt ({error}); {REBUILD_SHARD}") from None
    if vectors.dtype != np.float32 or vectors.shape != (len(items), manifest.dim) or manifest.count != len(items):
        raise IndexFormatError(
            f"{path} holds {vectors.dtype} {vectors.shape}, but the shard lists {len(items)} items of "
            f"{manifest.dim} dimensions; {REBUILD_SHARD}"
        )
    records = [ImageRecord(Path(i.path), i.label, i.split, i.is_query, i.is_gallery, i.metadata, i.key) for i in items]
    return np.asarray([i.row for i in items], dtype=np.int64), records, vectors


def merge_shards(
    out_dir: Path, shard_dirs: Sequence[Path], *, progress: bool = False, target: IndexTarget | None = None
) -> MergeReport:
    """Combine all shards of one ``--shard I/N`` build into the index directory ``out_dir`` (with a
    ``MilvusTarget``: a bulk insert of their items, in the same order and with the same ids, into that
    collection)."""
    started = time.perf_counter()
    dirs = [Path(d) for d in shard_dirs]
    manifests = [load_shard_manifest(d) for d in dirs]
    check_shards(dirs, manifests)
    first = manifests[0]
    kinds = index_kinds(first.float_kind, first.binary_kind)
    parts = [read_shard(d, m) for d, m in zip(dirs, manifests, strict=True)]
    positions = np.concatenate([p[0] for p in parts])
    if len(np.unique(positions)) != len(positions) or (len(positions) and positions.max() >= first.listing_size):
        raise IndexFormatError(f"the shards' item positions overlap or exceed the listing; {REBUILD_SHARD}")
    failures = sum(m.failures for m in manifests)
    if not len(positions):
        raise DataError(f"none of the {first.listing_size} images could be read ({failures} failed in the shards)")
    order = np.argsort(positions, kind="stable")
    records = [record for part in parts for record in part[1]]
    vectors = np.concatenate([np.asarray(p[2]) for p in parts])[order]
    model = _merge_model(dirs[0], first)
    ordered = [records[i] for i in order]
    manifest = write_index(Path(out_dir), model, ordered, vectors, kinds, progress=progress, target=target)
    return MergeReport(
        Path(out_dir),
        manifest.count,
        manifest.num_labels,
        len(dirs),
        failures,
        first.model_sha256,
        manifest.float_kind,
        manifest.binary_kind,
        time.perf_counter() - started,
        backend_of(manifest).describe(manifest),
    )


def _merge_model(shard_dir: Path, manifest: ShardManifest) -> ShardModel:
    """The original export directory where it still holds the same model (the index records it, as
    one build does), else the shard's own copy."""
    original = Path(manifest.model_dir)
    if is_export_dir(original) and file_sha256(original / manifest.model.onnx_file) == manifest.model_sha256:
        return ShardModel(manifest.model_sha256, manifest.model, original)
    copy = shard_dir / INDEX_MODEL_SUBDIR
    if not is_export_dir(copy) or file_sha256(copy / manifest.model.onnx_file) != manifest.model_sha256:
        raise IndexFormatError(f"{copy} does not hold the model the shard was embedded with; {REBUILD_SHARD}")
    return ShardModel(manifest.model_sha256, manifest.model, copy)
