"""A new model without downtime: ``retrieval index rebuild INDEX --model NEW``, ``index switch``,
``index rollback``.

``rebuild_index`` re-embeds every stored image with the new model into the next generation beside the
live index (``generations``), chunk by chunk (``generation_sync``): killed, it goes on from the last
committed chunk when run again with the same model. Writes that reach the live index meanwhile (the
service's adds and removes) are caught up by a second pass, the new generation is compacted into the
live index's kinds, and then, under the live index's writer lock, a last pass catches up with the
latest writes and hands over the id counter and idempotency records, and the switch makes the new
generation live, keeping the old one as the previous generation. The service goes on answering from
the generation it loaded and picks the new one up on its next reload (``POST /admin/reload``, SIGHUP);
until then its writes are refused with 409 (the index changed), which a client retries after the reload.

``rollback_index`` is the same switch the other way: the previous generation catches up with what was
written since (embedded with its own model) and becomes live again, the older previous generations move
up one place, and the rolled-back generation becomes the next one, so a rebuild with its model, or ``switch_index``, returns to it by catching up only.
The files backend only: a Milvus collection is rebuilt by building a new one (``index build``).
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retrieval.indexing.common.artifact_names import INDEX_MODEL_SUBDIR
from retrieval.indexing.common.errors import ConfigError, DataError, IndexFormatError
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.resolution import resolve_export_dir
from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind
from retrieval.indexing.store.files.files_target import FilesTarget
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.maintenance.generation_sync import Progress, SyncReport, sync_generation
from retrieval.indexing.store.maintenance.generations import (
    KEEP_PREVIOUS,
    next_generation_dir,
    previous_generation_dir,
    promote,
    restore_previous,
)
from retrieval.indexing.store.shared.index_directory.index_dir import IndexContents
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest, load_index_manifest
from retrieval.indexing.store.shared.index_directory.write_lock import exclusive_writer

LISTED_FAILURES = 10
_log = logging.getLogger(__name__)


@dataclass
class UpgradeReport:
    """What a rebuild, switch or rollback did; ``switched``: the generation with ``model_sha256`` is live;
    ``unchanged``: why nothing was done (the live generation already has that model)."""

    index_dir: Path
    model_sha256: str
    count: int = 0
    embedded: int = 0
    removed: int = 0
    switched: bool = False
    seconds: float = 0.0
    failures: list[tuple[int, str]] = field(default_factory=list)
    unchanged: str = ""


def rebuild_index(
    index_dir: str | Path,
    model: str | Path,
    *,
    batch_size: int = 32,
    threads: int | None = None,
    switch: bool = True,
    progress: Progress | None = None,
    keep: int = KEEP_PREVIOUS,
) -> UpgradeReport:
    """Re-embed every item of ``index_dir`` with ``model`` into its next generation, then (``switch``)
    make that generation live, keeping ``keep`` previous generations (see the module). With the live
    model it changes nothing: the report says why (``unchanged``). The use case ``rebuild_index`` of
    ``index rebuild`` and the Python API (``usecases.maintaining`` re-exports it)."""
    started = time.perf_counter()
    index_dir, model = Path(index_dir), Path(model)
    live = _files_index(index_dir)
    embedder = OnnxEmbedder(resolve_export_dir(model), threads=threads)
    if embedder.model_sha256 == live.model_sha256:
        return _unchanged(index_dir, live)
    target = next_generation_dir(index_dir)
    _start_generation(target, embedder)
    report = UpgradeReport(Path(index_dir), embedder.model_sha256)
    for _ in range(2):  # the second pass catches up with what was written during the first
        _count(report, sync_generation(index_dir, target, embedder, batch_size=batch_size, progress=progress))
    _compact_like(target, live)
    if switch:
        _switch(index_dir, target, embedder, batch_size, report, keep=keep)
    report.seconds = time.perf_counter() - started
    return report


def switch_index(
    index_dir: Path, *, batch_size: int = 32, threads: int | None = None, keep: int = KEEP_PREVIOUS
) -> UpgradeReport:
    """Make the next generation (a finished or interrupted rebuild) live, after catching it up and
    compacting it into the live index's kinds; ``keep`` previous generations are kept."""
    return _exchange(index_dir, next_generation_dir(index_dir), batch_size, threads, keep=keep)


def rollback_index(index_dir: Path, *, batch_size: int = 32, threads: int | None = None) -> UpgradeReport:
    """Make the previous generation live again, after catching it up with its own model; the rolled-back
    generation becomes the next one."""
    return _exchange(index_dir, previous_generation_dir(index_dir), batch_size, threads, keep=None)


def _exchange(
    index_dir: Path, incoming: Path, batch_size: int, threads: int | None, *, keep: int | None
) -> UpgradeReport:
    """A switch to the next generation (``keep``: previous generations kept), or (None) a rollback."""
    started = time.perf_counter()
    live = _files_index(index_dir)
    compact = keep is not None
    if not (incoming / INDEX_MODEL_SUBDIR).is_dir():
        which = "next" if compact else "previous"
        raise ConfigError(
            f"{index_dir} has no {which} generation ({incoming} is missing); "
            + (
                "run `retrieval index rebuild INDEX --model NEW` first"
                if which == "next"
                else "nothing to roll back to"
            )
        )
    embedder = OnnxEmbedder(incoming / INDEX_MODEL_SUBDIR, threads=threads)
    if compact and embedder.model_sha256 == live.model_sha256:
        return _unchanged(index_dir, live)
    report = UpgradeReport(Path(index_dir), embedder.model_sha256)
    _count(report, sync_generation(index_dir, incoming, embedder, batch_size=batch_size))
    if compact:
        _compact_like(incoming, live)
    _switch(index_dir, incoming, embedder, batch_size, report, keep=keep)
    report.seconds = time.perf_counter() - started
    return report


def _files_index(index_dir: Path) -> IndexManifest:
    manifest = load_index_manifest(Path(index_dir))
    if manifest.backend != "files":
        raise ConfigError(
            f"{index_dir} keeps its items in Milvus; build a new collection with the new model "
            "(`retrieval index build --backend milvus`) instead"
        )
    return manifest


def _unchanged(index_dir: Path, live: IndexManifest) -> UpgradeReport:
    report = UpgradeReport(Path(index_dir), live.model_sha256, count=live.count)
    report.unchanged = (
        f"{index_dir} already uses model {live.model_sha256[:12]}: nothing to rebuild, and its previous "
        "generations are kept as they are"
    )
    return report


def _start_generation(target: Path, embedder: OnnxEmbedder) -> None:
    """An empty next generation for ``embedder``'s model, unless one for it is there already (a rebuild
    that was killed: it goes on); one for another model, or a broken one, is discarded."""
    if target.exists():
        try:
            if load_index_manifest(target).model_sha256 == embedder.model_sha256:
                return
            reason = "it is for another model"
        except IndexFormatError as error:
            reason = str(error)
        _log.warning("discarding the next generation %s: %s", target, reason)
        shutil.rmtree(target)
    kinds = (float_kind("flat"), binary_kind("flat"))  # the live kinds come with the last compaction
    FilesTarget().write(target, IndexContents(embedder, [], np.zeros((0, embedder.dim), np.float32), kinds))


def _compact_like(target: Path, live: IndexManifest) -> None:
    """Fold the generation into one base of the live index's kinds, with its compaction policy."""
    with IndexStore.open(target) as store:
        store.compact(policy=live.compaction, kinds=(live.float_kind, live.binary_kind))


def _switch(
    index_dir: Path,
    incoming: Path,
    embedder: OnnxEmbedder,
    batch_size: int,
    report: UpgradeReport,
    *,
    keep: int | None,
) -> None:
    """The last catch-up and the switch (``keep`` None: the rollback), under the live index's writer lock
    (its writers wait meanwhile)."""
    with exclusive_writer(index_dir):
        last = sync_generation(index_dir, incoming, embedder, batch_size=batch_size, keep_ids=True)
        _count(report, last)
        if last.failures:
            shown = "; ".join(f"item {item_id}: {reason}" for item_id, reason in last.failures[:LISTED_FAILURES])
            raise DataError(
                f"{len(last.failures)} item(s) could not be embedded with the new model ({shown}); restore their "
                f"image files or remove them (`retrieval index remove {index_dir} ID...`), then run this again"
            )
        if keep is None:
            restore_previous(index_dir)
        else:
            promote(index_dir, incoming, keep=keep)
    with IndexStore.open(index_dir) as store:
        report.count = store.count
    report.switched = True


def _count(report: UpgradeReport, sync: SyncReport) -> None:
    report.embedded += sync.added
    report.removed += sync.removed
    report.failures = sync.failures
