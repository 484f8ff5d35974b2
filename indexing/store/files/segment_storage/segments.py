"""The segments of an index directory: one immutable base plus append-only deltas, with tombstones.

* The **base** is the files at the top of the directory (``segment_files``), indexed with the
  manifest's float and binary kinds. It changes only by a compaction (``compaction.py``).
* Each ``add`` writes one **delta**, ``segments/NAME/`` with the same three files holding only the
  added items, indexed with the exact flat kinds (no training, so an add costs O(added); deltas stay
  small, because compaction folds them into the base, as Milvus seals its growing segments).
* Embedding rows are numbered across segments: the base holds rows ``0..n-1``, a delta the range
  ``first_row..first_row+rows-1`` it was written with; ``items.sqlite`` keeps each item's row.
* A ``remove`` deletes the SQLite rows only. The ids still stored in a segment's faiss indexes but no
  longer in SQLite are its **tombstones**, dropped at search time (``segment_searcher``) until a
  compaction rewrites the segment, so a remove touches no faiss file either.
* The list of committed deltas and the generation of the base (``base_generation``: the compaction
  that wrote it) live in the SQLite ``meta`` table, committed in the same transaction as the items.
  A compaction writes the new base into ``.base-G/`` first and renames its files to the top after
  its commit; a ``.base-G/`` of the committed ``G`` therefore holds the newer files (``base_file``).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from retrieval.indexing.common.artifact_names import SEGMENTS_SUBDIR
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.store.files.faiss_kinds import (
    IndexKind,
    binary_kind,
    build_binary_index,
    build_float_index,
    id_map_ids,
)
from retrieval.indexing.store.files.faiss_kinds import float_kind as float_kind_named
from retrieval.indexing.store.files.segment_storage.segment_files import SEGMENT_FILES
from retrieval.indexing.store.shared.items.items_db import ItemsDb

BASE = ""
"""The name of the base segment."""
_DELTAS_KEY, _BASE_KEY = "segments", "base_generation"
_CODE_CHUNK = 65_536  # rows binarised at once (a float16 memory map is never converted whole)


@dataclass(frozen=True)
class SegmentInfo:
    """Where a segment's embedding rows start and how many it holds."""

    name: str
    first_row: int
    rows: int

    @property
    def end_row(self) -> int:
        return self.first_row + self.rows


def delta_kinds() -> tuple[IndexKind, IndexKind]:
    """Deltas are exact: flat float and flat binary indexes."""
    return float_kind_named("flat"), binary_kind("flat")


def delta_name(generation: int) -> str:
    """A delta is named after the generation that committed it (unique: every commit is a new one)."""
    return f"g{generation:08d}"


def segment_dir(index_dir: Path, name: str) -> Path:
    return Path(index_dir) if name == BASE else Path(index_dir) / SEGMENTS_SUBDIR / name


def staged_base_dir(index_dir: Path, generation: int) -> Path:
    return Path(index_dir) / f".base-{generation}"


def base_file(index_dir: Path, generation: int, name: str) -> Path:
    """The base's file ``name``: from ``.base-G/`` while a committed compaction has not moved it yet."""
    staged = staged_base_dir(index_dir, generation) / name
    return staged if staged.is_file() else Path(index_dir) / name


def committed_deltas(db: ItemsDb) -> list[SegmentInfo]:
    return [SegmentInfo(**entry) for entry in json.loads(db.meta(_DELTAS_KEY, "[]"))]


def commit_deltas(db: ItemsDb, deltas: list[SegmentInfo]) -> None:
    """Record the delta list (inside the caller's transaction)."""
    db.set_meta(_DELTAS_KEY, json.dumps([info.__dict__ for info in deltas]))


def base_generation(db: ItemsDb) -> int:
    return int(db.meta(_BASE_KEY, "0"))


def commit_base_generation(db: ItemsDb, generation: int) -> None:
    db.set_meta(_BASE_KEY, str(generation))


@dataclass
class Segment:
    """A loaded segment: its memory-mapped embeddings, its two faiss indexes and its tombstones."""

    info: SegmentInfo
    embeddings: np.ndarray  # (rows, d) float16
    float_index: Any  # faiss.IndexIDMap2
    binary_index: Any  # faiss.IndexBinaryIDMap2
    float_kind: IndexKind
    binary_kind: IndexKind
    ids: np.ndarray = field(init=False)  # sorted ids in the faiss indexes
    dead: np.ndarray = field(init=False)  # sorted tombstones: ids in the indexes that are no longer items
    _selector: tuple[Any, Any] | None = field(default=None, init=False, repr=False)
    _live: np.ndarray | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.ids = np.union1d(id_map_ids(self.float_index), id_map_ids(self.binary_index))
        self.dead = np.zeros(0, np.int64)

    def index(self, kind: SearchKind) -> Any:
        """The faiss index of ``kind`` (``IndexIDMap2`` or ``IndexBinaryIDMap2``)."""
        return self.float_index if kind is SearchKind.FLOAT else self.binary_index

    def index_kind(self, kind: SearchKind) -> IndexKind:
        """The index kind (flat, ivf, ...) the faiss index of ``kind`` was built with."""
        return self.float_kind if kind is SearchKind.FLOAT else self.binary_kind

    @property
    def live_count(self) -> int:
        return len(self.ids) - len(self.dead)

    def live_ids(self) -> np.ndarray:
        """The ids of the segment that are still items (computed once per change of the tombstones)."""
        if self._live is None:
            self._live = np.setdiff1d(self.ids, self.dead, assume_unique=True) if len(self.dead) else self.ids
        return self._live

    def set_dead(self, dead: np.ndarray) -> None:
        self.dead = np.asarray(dead, dtype=np.int64)
        self._selector = self._live = None

    def tombstone_selector(self) -> Any:
        """A faiss selector of the live ids (``IDSelectorNot`` of the tombstones), built once per change."""
        if self._selector is None:
            inner = faiss.IDSelectorBatch(self.dead)  # faiss's wrapper takes an id array
            self._selector = (faiss.IDSelectorNot(inner), inner)  # the outer one does not keep `inner` alive
        return self._selector[0]


def index_segment(
    kinds: tuple[IndexKind, IndexKind],
    vectors: np.ndarray,
    ids: np.ndarray,
    threshold: float,
    *,
    progress: bool = False,
) -> tuple[Any, Any]:
    """Float and binary faiss indexes of one segment's vectors (float32, or a float16 memory map) under ``ids``."""
    float_index = build_float_index(kinds[0], vectors, ids, progress=progress)
    parts = [binarize(vectors[start : start + _CODE_CHUNK], threshold) for start in range(0, len(vectors), _CODE_CHUNK)]
    codes = np.concatenate(parts) if parts else binarize(np.zeros((0, vectors.shape[1]), np.float32))
    return float_index, build_binary_index(kinds[1], codes, ids, vectors.shape[1], progress=progress)


def finish_base_swap(index_dir: Path, generation: int) -> bool:
    """Move a committed compaction's new base files from ``.base-G/`` to the top (with the writer lock
    held); returns whether there was anything to move."""
    staged = staged_base_dir(index_dir, generation)
    if not staged.is_dir():
        return False
    for name in SEGMENT_FILES:
        if (staged / name).is_file():
            os.replace(staged / name, Path(index_dir) / name)
    _fsync_dir(Path(index_dir))
    shutil.rmtree(staged, ignore_errors=True)
    return True


def remove_uncommitted(index_dir: Path, deltas: list[SegmentInfo], generation: int) -> list[Path]:
    """Delete delta folders not in the committed list and staged bases of uncommitted compactions
    (what a writer killed before its commit left, or the deltas a compaction merged). Call with the
    writer lock held."""
    keep = {info.name for info in deltas}
    folder = Path(index_dir) / SEGMENTS_SUBDIR
    leftovers = [p for p in folder.iterdir() if p.name not in keep] if folder.is_dir() else []
    leftovers += [p for p in Path(index_dir).glob(".base-*") if p != staged_base_dir(index_dir, generation)]
    for path in leftovers:
        shutil.rmtree(path, ignore_errors=True)
    return leftovers


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
