"""Bring one generation of an index to the items of another: the same ids and records, each embedded
with the target generation's own model.

The source is read from its item table alone (no faiss index of the live generation is loaded). Items
the source holds and the target does not are embedded and added under their ids (in chunks: each chunk
is one committed delta of the target, so a killed sync loses at most a chunk and the next run goes on
from there); items the target holds and the source no longer does are removed. Images the service
stored in the source's ``uploads/`` are hard-linked into the target's (copied across file systems), and
the target's item points to its own link (stored relative to its directory: ``item_paths``), so each
generation finds its files wherever it is and whichever is live. This is how the writes that reach the
live index during a rebuild get into the new generation: every pass catches up with them, and the last
one runs under the live index's writer lock, just before the switch.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retrieval.indexing.common.artifact_names import ITEMS_DB_NAME, UPLOADS_SUBDIR
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.files.store_updates import IdLedger
from retrieval.indexing.store.shared.items.items_db import Item, ItemsDb

CHUNK = 1024  # items embedded and committed at once
Progress = Callable[[int, int], None]


@dataclass
class SyncReport:
    """What a pass did: items embedded and added, items removed, and items whose image could not be read."""

    added: int = 0
    removed: int = 0
    failures: list[tuple[int, str]] = field(default_factory=list)  # (item id, reason)


def sync_generation(
    source_dir: Path,
    target_dir: Path,
    embedder: OnnxEmbedder,
    *,
    batch_size: int = 32,
    keep_ids: bool = False,
    progress: Progress | None = None,
) -> SyncReport:
    """Make ``target_dir`` hold the items of ``source_dir`` (see the module); ``keep_ids`` also hands over
    the source's id counter and idempotency records (the last pass, before a switch); ``progress`` is
    called with (items done, items to do) after each chunk."""
    report = SyncReport()
    source = ItemsDb.open(Path(source_dir) / ITEMS_DB_NAME)  # the items alone: no faiss index is loaded
    try:
        with IndexStore.open(target_dir) as target:
            source_ids = source.id_rows()[0]
            gone = np.setdiff1d(target.ids(), source_ids)
            if len(gone):
                paths = [item.path for item in target.items(gone.tolist()) if item is not None]
                report.removed = target.remove(gone.tolist())
                _drop_unused_uploads(Path(source_dir), target, paths)
            missing = np.setdiff1d(source_ids, target.ids())
            for start in range(0, len(missing), CHUNK):
                items = [item for item in source.items(missing[start : start + CHUNK].tolist()) if item is not None]
                _add(Path(source_dir), target, embedder, items, batch_size, report)
                if progress is not None:
                    progress(min(start + CHUNK, len(missing)), len(missing))
            if keep_ids:
                target.adopt_id_ledger(IdLedger(source.last_id, source.remembered()))
    finally:
        source.close()
    return report


def _add(
    source_dir: Path, target: IndexStore, embedder: OnnxEmbedder, items: list[Item], batch: int, report: SyncReport
) -> None:
    """Embed ``items`` with the target's model and add those that could be read under their ids."""
    for item in items:
        _link_upload(source_dir, target.index_dir, Path(item.path))
    result = embedder.embed_paths([Path(item.path) for item in items], batch_size=batch, progress=False)
    unread = {str(path): reason for path, reason in result.failures}
    report.failures += [(item.id, unread[item.path]) for item in items if item.path in unread]
    kept = [items[position] for position in result.ok]
    if kept:
        records = [_record(item, source_dir, target.index_dir) for item in kept]
        target.add(records, result.embeddings, ids=[item.id for item in kept])
        report.added += len(kept)


def _record(item: Item, source_dir: Path, target_dir: Path) -> ImageRecord:
    path = Path(item.path)
    if _is_upload_of(path, source_dir):
        path = target_dir / UPLOADS_SUBDIR / path.name
    return ImageRecord(
        path=path,
        label=item.label,
        split=item.split,
        is_query=item.is_query,
        is_gallery=item.is_gallery,
        metadata=dict(item.metadata),
        key=item.key,
    )


def _link_upload(source_dir: Path, target_dir: Path, path: Path) -> None:
    """Give the target generation its own link to an image the service stored in the source's uploads/."""
    if not path.is_file() or not _is_upload_of(path, source_dir):
        return
    copy = target_dir / UPLOADS_SUBDIR / path.name
    if copy.exists():
        return
    copy.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(path, copy)
    except OSError:  # another file system
        shutil.copy2(path, copy)


def _drop_unused_uploads(source_dir: Path, target: IndexStore, paths: list[str]) -> None:
    """Delete the target's links to stored images none of its items points to any more (its items point
    to its own links, or to the source's where an older version synced them)."""
    in_use = target.paths_in_use(paths)
    for path in paths:
        if path not in in_use and (
            _is_upload_of(Path(path), source_dir) or _is_upload_of(Path(path), target.index_dir)
        ):
            (target.index_dir / UPLOADS_SUBDIR / Path(path).name).unlink(missing_ok=True)


def _is_upload_of(path: Path, index_dir: Path) -> bool:
    """Whether ``path`` is an image the service stored in ``index_dir``'s uploads/."""
    return path.resolve().parent == (Path(index_dir) / UPLOADS_SUBDIR).resolve()
