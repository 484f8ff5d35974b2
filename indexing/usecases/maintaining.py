"""Look after an index directory: what it holds now (``index_info``), backups (``snapshot_index``,
``verify_index``) and a model upgrade without downtime (``rebuild_index``, ``switch_index``,
``rollback_index``); docs/operations.md says when to use which."""

from __future__ import annotations

from pathlib import Path

from retrieval.indexing.store.backends import FILES
from retrieval.indexing.store.files.index_store import committed_manifest
from retrieval.indexing.store.maintenance import index_snapshot, index_verify, model_upgrade
from retrieval.indexing.store.maintenance.generations import KEEP_PREVIOUS, Generation, generations
from retrieval.indexing.store.maintenance.index_snapshot import SnapshotReport
from retrieval.indexing.store.maintenance.index_verify import VerifyReport
from retrieval.indexing.store.maintenance.model_check import DEEP_SAMPLE
from retrieval.indexing.store.maintenance.model_upgrade import UpgradeReport
from retrieval.indexing.store.maintenance.model_upgrade import rebuild_index as rebuild_index
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest, load_index_manifest
from retrieval.indexing.usecases.inputs import PathLike


def index_info(index_dir: PathLike) -> IndexManifest:
    """The manifest of ``index_dir`` as committed (a files index finishes an update killed after its
    commit first)."""
    manifest = load_index_manifest(Path(index_dir))
    return committed_manifest(Path(index_dir)) if manifest.backend == FILES else manifest


def index_generations(index_dir: PathLike) -> list[Generation]:
    """The generations of ``index_dir`` on disk: live, next (a rebuild not switched to, or a rolled-back
    one) and the previous ones a rollback returns to, the most recent first."""
    return generations(Path(index_dir))


def snapshot_index(index_dir: PathLike, out: PathLike) -> SnapshotReport:
    """A consistent copy of ``index_dir`` in the new directory ``out``, taken while others may write it."""
    return index_snapshot.snapshot_index(Path(index_dir), Path(out))


def verify_index(index_dir: PathLike, *, deep: bool = False, sample: int = DEEP_SAMPLE) -> VerifyReport:
    """Check every file, id, vector and record; an ``IndexFormatError`` names the first problem. ``deep``
    also embeds up to ``sample`` stored images again and compares them with their stored vectors."""
    return index_verify.verify_index(Path(index_dir), deep=deep, sample=sample)


def switch_index(
    index_dir: PathLike, *, batch_size: int = 32, threads: int | None = None, keep: int = KEEP_PREVIOUS
) -> UpgradeReport:
    """Make the next generation live (a rebuild run with ``switch=False``, or a rolled-back one)."""
    return model_upgrade.switch_index(Path(index_dir), batch_size=batch_size, threads=threads, keep=keep)


def rollback_index(index_dir: PathLike, *, batch_size: int = 32, threads: int | None = None) -> UpgradeReport:
    """Make the previous generation (the model before the last switch) live again."""
    return model_upgrade.rollback_index(Path(index_dir), batch_size=batch_size, threads=threads)
