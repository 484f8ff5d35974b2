"""Sharded embedding: ``retrieval index build --shard I/N`` embeds only shard I of N of a gallery.

Assignment is stable: an item's shard is ``sha256(key) mod N`` where the key is its path relative to
the data root (``--data`` itself, or the folder of a CSV listing), so it depends neither on the
machine, nor the mount point, nor the order of the listing; a path outside the root is its own key.

A shard directory holds ``shard.json`` (``ShardManifest``), ``embeddings.f32.npy`` (float32 rows,
so the merge indexes exactly the vectors one unsharded build would), ``items.sqlite`` (the item
table of an index, whose ``row`` is the item's position in the WHOLE listing: the merge orders
by it, which reproduces the ids of one build) and ``model/`` (a copy of the export).
``shard_merge`` combines N of them into one index directory.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from retrieval.indexing.common.artifact_names import (
    INDEX_MODEL_SUBDIR,
    ITEMS_DB_NAME,
    SHARD_EMBEDDINGS_NAME,
    SHARD_MANIFEST_NAME,
)
from retrieval.indexing.common.atomic_write import atomic_directory, atomic_write_text, atomic_write_with
from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.resolution import resolve_export_dir
from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind
from retrieval.indexing.store.shared.index_directory.index_dir import copy_model
from retrieval.indexing.store.shared.index_directory.index_manifest import utc_now
from retrieval.indexing.store.shared.items.items_db import ItemsDb
from retrieval.indexing.store.shared.store_checks import validate_records

SHARD_FORMAT_VERSION = 1
_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class ShardSpec:
    """Shard ``index`` (from 0) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> ShardSpec:
    """``"I/N"`` -> ShardSpec, or a ConfigError saying what a shard spec is."""
    match = _SPEC.fullmatch(text)
    if match is None:
        raise ConfigError(f'--shard "{text}" is not I/N, e.g. 0/8 for the first of 8 shards (numbered from 0)')
    index, count = int(match[1]), int(match[2])
    if count < 1:
        raise ConfigError(f"--shard {text}: the number of shards must be at least 1")
    if index >= count:
        raise ConfigError(
            f"--shard {text}: shards are numbered 0 to {count - 1} (as JOB_COMPLETION_INDEX and a Slurm "
            f"--array=0-{count - 1} count)"
        )
    return ShardSpec(index, count)


def data_root(data: Path) -> Path:
    """The folder item keys are relative to: ``--data`` itself, or the folder of a listing file."""
    data = Path(data).expanduser()
    return (data if data.is_dir() else data.parent).resolve()


def item_key(path: Path, root: Path) -> str:
    """The path relative to ``root`` in POSIX form; an absolute path where it lies outside ``root``."""
    resolved = Path(path).expanduser().resolve()
    try:
        return resolved.relative_to(root).as_posix()
    except ValueError:
        return resolved.as_posix()


def shard_of(key: str, count: int) -> int:
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % count


def listing_sha256(keys: Sequence[str], records: Sequence[ImageRecord]) -> str:
    """Fingerprint of the whole listing in order (keys and labels): every shard of one build agrees on it."""
    digest = hashlib.sha256()
    for key, record in zip(keys, records, strict=True):
        digest.update(f"{key}\t{record.label}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


class ShardManifest(BaseModel):
    """``shard.json``: which shard of which listing, embedded by which model."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    format_version: int = SHARD_FORMAT_VERSION
    shard: int = Field(ge=0)
    shards: int = Field(ge=1)
    model_sha256: str
    model: ModelManifest
    model_dir: str = Field(description="absolute export directory the shard was embedded with")
    dim: int = Field(gt=0)
    float_kind: str
    binary_kind: str
    listing_size: int = Field(ge=0, description="records in the whole listing (all shards)")
    listing_sha256: str
    count: int = Field(ge=0, description="items embedded into this shard")
    failures: int = Field(ge=0, description="images of this shard that could not be read (skipped)")
    created_at: str


@dataclass
class ShardReport:
    shard_dir: Path
    spec: ShardSpec
    count: int
    listing_size: int
    model_sha256: str
    embed_seconds: float
    failures: list[tuple[Path, str]] = field(default_factory=list)


def build_shard(
    model_dir: Path,
    records: Sequence[ImageRecord],
    out_dir: Path,
    *,
    root: Path,
    spec: ShardSpec,
    float_kind_name: str = "flat",
    binary_kind_name: str = "flat",
    batch_size: int = 32,
    threads: int | None = None,
    progress: bool = True,
) -> ShardReport:
    """Embed the records of shard ``spec`` and write a shard directory at ``out_dir`` (atomically)."""
    float_kind(float_kind_name), binary_kind(binary_kind_name)  # a misspelt kind fails before embedding
    if not records:
        raise DataError("the gallery is empty; point --data at a folder or list with at least one image")
    validate_records(records)  # the whole listing: every shard refuses what one build would
    _check_shard_out(Path(out_dir))
    keys = [item_key(record.path, root) for record in records]
    positions = [i for i, key in enumerate(keys) if shard_of(key, spec.count) == spec.index]
    embedder = OnnxEmbedder(resolve_export_dir(model_dir), threads=threads)
    started = time.perf_counter()
    result = embedder.embed_paths([records[i].path for i in positions], batch_size=batch_size, progress=progress)
    seconds = time.perf_counter() - started
    kept = [positions[i] for i in result.ok]
    manifest = ShardManifest(
        shard=spec.index,
        shards=spec.count,
        model_sha256=embedder.model_sha256,
        model=embedder.manifest,
        model_dir=str(embedder.export_dir.resolve()),
        dim=embedder.dim,
        float_kind=float_kind_name,
        binary_kind=binary_kind_name,
        listing_size=len(records),
        listing_sha256=listing_sha256(keys, records),
        count=len(kept),
        failures=len(result.failures),
        created_at=utc_now(),
    )
    with atomic_directory(Path(out_dir)) as staging:
        _write_shard_files(staging, embedder, [records[i] for i in kept], kept, result.embeddings, manifest)
    return ShardReport(Path(out_dir), spec, len(kept), len(records), embedder.model_sha256, seconds, result.failures)


def _check_shard_out(out_dir: Path) -> None:
    """Refuse to replace a non-empty directory that is not a shard (it could be an index or photos)."""
    if out_dir.exists() and (
        not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / SHARD_MANIFEST_NAME).is_file())
    ):
        raise ConfigError(f"{out_dir} exists and is not a shard directory; choose a new or empty --out")


def _write_shard_files(
    staging: Path,
    embedder: OnnxEmbedder,
    records: Sequence[ImageRecord],
    positions: Sequence[int],
    embeddings: np.ndarray,
    manifest: ShardManifest,
) -> None:
    vectors = np.asarray(embeddings, dtype=np.float32).reshape(len(records), manifest.dim)

    def write_vectors(tmp: Path) -> None:
        with open(tmp, "wb") as handle:  # np.save(path) would append .npy to the temporary name
            np.save(handle, vectors)

    atomic_write_with(staging / SHARD_EMBEDDINGS_NAME, write_vectors)
    db = ItemsDb.create(staging / ITEMS_DB_NAME)
    try:
        with db.transaction():
            db.insert(records, positions)
    finally:
        db.close()
    copy_model(embedder, staging / INDEX_MODEL_SUBDIR)
    atomic_write_text(staging / SHARD_MANIFEST_NAME, manifest.model_dump_json(indent=2) + "\n")
