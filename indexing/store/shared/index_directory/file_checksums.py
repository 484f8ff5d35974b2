"""The sha256 of every file of a files index, recorded in its manifest each time it is written
(``IndexManifest.files``), so ``retrieval index verify`` catches any changed byte of a plain index.

Every writer saves the manifest last; then the files of the index are listed (``index_files``: no
hidden entries, no SQLite side files, no manifest or snapshot manifest, no ``uploads/``, whose files are
named by their own sha256) and each is hashed, unless the previous manifest recorded it with the same
size and modification time: files other than ``items.sqlite`` are written once and replaced by a
rename, so a write hashes what it wrote (a delta segment, a new base, the item table), not the whole
index. An index written by an older version has no checksums (``files`` is None).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from retrieval.indexing.common.artifact_names import (
    INDEX_MANIFEST_NAME,
    ITEMS_DB_NAME,
    SNAPSHOT_MANIFEST_NAME,
    UPLOADS_SUBDIR,
)
from retrieval.indexing.exported_model.model_manifest import file_sha256

_SQLITE_SIDE_FILES = (f"{ITEMS_DB_NAME}-journal", f"{ITEMS_DB_NAME}-wal", f"{ITEMS_DB_NAME}-shm")
_NOT_CHECKSUMMED = (INDEX_MANIFEST_NAME, SNAPSHOT_MANIFEST_NAME)


class FileChecksum(BaseModel):
    """One file's sha256, with the size and modification time it had when hashed."""

    model_config = ConfigDict(extra="forbid")

    sha256: str
    size: int
    mtime_ns: int


def index_files(root: Path) -> Iterator[str]:
    """Paths (relative, POSIX) of the files of an index: no hidden entries (temporary files, staged
    compactions), no SQLite side files, no earlier snapshot's manifest."""
    for folder, folders, names in os.walk(root):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(names):
            relative = (Path(folder) / name).relative_to(root)
            if name.startswith(".") or name in _SQLITE_SIDE_FILES or relative.as_posix() == SNAPSHOT_MANIFEST_NAME:
                continue
            yield relative.as_posix()


def checksummed_files(root: Path) -> Iterator[str]:
    """The files whose checksums the manifest records (``index_files`` less the manifest and uploads)."""
    for relative in index_files(root):
        if relative not in _NOT_CHECKSUMMED and not relative.startswith(f"{UPLOADS_SUBDIR}/"):
            yield relative


def record_checksums(root: Path, previous: dict[str, FileChecksum] | None) -> dict[str, FileChecksum]:
    """The checksum of every file of ``root``, reusing ``previous`` for the files it saw unchanged."""
    previous = previous or {}
    recorded = {}
    for relative in checksummed_files(root):
        status = (root / relative).stat()
        known = previous.get(relative)
        if known is None or (known.size, known.mtime_ns) != (status.st_size, status.st_mtime_ns):
            known = FileChecksum(sha256=file_sha256(root / relative), size=status.st_size, mtime_ns=status.st_mtime_ns)
        recorded[relative] = known
    return recorded


def checksum_problem(root: Path, recorded: dict[str, FileChecksum]) -> str | None:
    """The first file of ``root`` that differs from ``recorded`` (changed or missing), as a sentence; None
    when every file matches."""
    for relative, checksum in sorted(recorded.items()):
        if not (root / relative).is_file():
            return f"{relative} is missing (listed in the manifest's checksums)"
        if file_sha256(root / relative) != checksum.sha256:
            return (
                f"{relative} has changed: its sha256 differs from the one recorded in the manifest when it was written"
            )
    return None
