"""``retrieval index snapshot INDEX OUT``: a consistent copy of a files index, taken while the service writes.

Under the index's writer lock (writers wait meanwhile; searches do not), an update killed after its
commit is finished first, every file is hard-linked into a staging directory beside ``OUT`` (copied
where the file system refuses a link: another disk), and the item table, the one file that changes in
place, is copied with SQLite's backup API. Hard links are safe because no writer changes a file in
place: each is written once and replaced by a rename. Then, with the lock released, the sha256 of every
file goes into ``OUT/snapshot.json`` and the staging directory becomes ``OUT``. Item paths into the index
are relative to it, so the copy's items point at the copy's own stored images. Restoring is copying
the snapshot back; ``retrieval index verify`` checks either against those hashes.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from retrieval.indexing.common.artifact_names import ITEMS_DB_NAME, SNAPSHOT_MANIFEST_NAME
from retrieval.indexing.common.atomic_write import atomic_write_text, fsync_dir
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.exported_model.model_manifest import file_sha256
from retrieval.indexing.store.files.index_store import committed_manifest
from retrieval.indexing.store.shared.index_directory.file_checksums import index_files
from retrieval.indexing.store.shared.index_directory.index_manifest import load_index_manifest, utc_now
from retrieval.indexing.store.shared.index_directory.write_lock import exclusive_writer
from retrieval.indexing.store.shared.items.item_paths import relocate_paths

SNAPSHOT_FORMAT = 1


@dataclass(frozen=True)
class SnapshotReport:
    out: Path
    generation: int
    count: int
    files: int
    linked: int  # files hard-linked (no extra space)
    copied: int  # files copied (another file system, and the item table)
    total_bytes: int
    seconds: float


def snapshot_index(index_dir: Path, out: Path) -> SnapshotReport:
    """Copy the committed generation of ``index_dir`` to the new directory ``out`` (see the module)."""
    started = time.perf_counter()
    index_dir, out = Path(index_dir), Path(out)
    manifest = load_index_manifest(index_dir)
    if manifest.backend != "files":
        raise ConfigError(
            f"{index_dir} keeps its items in the Milvus collection {manifest.milvus_collection!r}; back that up "
            "with Milvus's own tools (a snapshot copies the files backend)"
        )
    _check_out(index_dir, out)
    staging = out.parent / f".{out.name}.snapshot-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        with exclusive_writer(index_dir):
            manifest = committed_manifest(index_dir)  # finishes an update killed after its commit
            linked, copied = _link_files(index_dir, staging)
            _copy_item_table(index_dir / ITEMS_DB_NAME, staging / ITEMS_DB_NAME, index_dir)
        hashes = {path: file_sha256(staging / path) for path in index_files(staging)}
        write_snapshot_manifest(staging, manifest.generation, hashes)
        if out.is_dir():
            out.rmdir()  # empty, checked above
        os.replace(staging, out)
        fsync_dir(out.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    total = sum((out / path).stat().st_size for path in hashes)
    seconds = time.perf_counter() - started
    return SnapshotReport(out, manifest.generation, manifest.count, len(hashes), linked, copied + 1, total, seconds)


def write_snapshot_manifest(root: Path, generation: int, hashes: dict[str, str]) -> None:
    """``root/snapshot.json``: the generation and the sha256 of every file, by path relative to ``root``."""
    body = {"format": SNAPSHOT_FORMAT, "generation": generation, "created_at": utc_now(), "files": hashes}
    atomic_write_text(root / SNAPSHOT_MANIFEST_NAME, json.dumps(body, indent=1, sort_keys=True) + "\n")


def _check_out(index_dir: Path, out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out} exists and is not an empty directory; choose a new directory for the snapshot")
    if out.resolve().is_relative_to(index_dir.resolve()):
        raise ConfigError(f"{out} is inside the index {index_dir}; put the snapshot somewhere else")
    out.parent.mkdir(parents=True, exist_ok=True)


def _link_files(source: Path, target: Path) -> tuple[int, int]:
    """Hard-link (or copy) every file of ``source`` but the item table into ``target``: (linked, copied)."""
    linked = copied = 0
    for relative in index_files(source):
        if relative == ITEMS_DB_NAME:
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source / relative, destination)
            linked += 1
        except OSError:  # another file system, or links not allowed
            shutil.copy2(source / relative, destination)
            copied += 1
    return linked, copied


def _copy_item_table(source: Path, target: Path, index_dir: Path) -> None:
    """A consistent copy of the SQLite file (its pages as of one transaction), whose paths into the index
    (stored absolute by an older version) are made relative, so that they point into the copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    reading = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    writing = sqlite3.connect(target)
    try:
        reading.backup(writing)
        relocate_paths(writing, index_dir)
    finally:
        writing.close()
        reading.close()
