"""The loaded segments of an index and its live items: id -> row -> segment, and loading from disk.

Loading checks every segment against ``items.sqlite``: each live item whose row lies in a segment's
range must be in that segment's two faiss indexes. A committed delta whose faiss files are missing
or incomplete (an update interrupted after its commit point), or a base missing items (an update of
the earlier single-segment format interrupted the same way), is re-indexed from its stored
embeddings and reported as ``stale``, for ``IndexStore`` to save.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.indexing.common.artifact_names import BINARY_INDEX_NAME, EMBEDDINGS_NAME, FLOAT_INDEX_NAME
from retrieval.indexing.common.errors import IndexFormatError, ItemNotFoundError
from retrieval.indexing.store.files.faiss_kinds import IndexKind, binary_kind, float_kind, id_map_ids
from retrieval.indexing.store.files.segment_storage.compaction_plan import SegmentSize
from retrieval.indexing.store.files.segment_storage.segment_files import (
    REBUILD,
    faiss_files_exist,
    load_embeddings,
    read_faiss_files,
)
from retrieval.indexing.store.files.segment_storage.segments import (
    BASE,
    Segment,
    SegmentInfo,
    base_file,
    base_generation,
    committed_deltas,
    delta_kinds,
    index_segment,
    segment_dir,
)
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest
from retrieval.indexing.store.shared.items.items_db import ItemsDb


class SegmentSet:
    """Segments in row order (the base first) and the live items, ascending by id."""

    def __init__(self, segments: list[Segment], ids: np.ndarray, rows: np.ndarray) -> None:
        self.segments = segments
        self.ids, self.rows = ids, rows

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def deltas(self) -> list[SegmentInfo]:
        return [segment.info for segment in self.segments[1:]]

    @property
    def next_row(self) -> int:
        return max(segment.info.end_row for segment in self.segments)

    @property
    def tombstones(self) -> int:
        return sum(len(segment.dead) for segment in self.segments)

    def sizes(self) -> list[SegmentSize]:
        return [SegmentSize(len(segment.ids), len(segment.dead)) for segment in self.segments]

    def rows_of(self, ids: np.ndarray) -> np.ndarray:
        where, known = self._find(ids)
        if not known.all():
            raise ItemNotFoundError(f"there is no item {int(ids[~known][0])} in the index")
        return self.rows[where]

    def live(self, ids: np.ndarray) -> np.ndarray:
        """Those of ``ids`` that are live items here, in their order: a binary search of each in the
        ascending live ids, O(len(ids) log count) (``np.intersect1d`` sorted all of them, 3 ms of a
        filtered search on 100k items)."""
        return ids[self._find(ids)[1]]

    def _find(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(where each of ``ids`` is or would go in the live ids, whether it is there)."""
        where = np.searchsorted(self.ids, ids)
        if len(self.ids) == 0:  # an index emptied by removes: nothing is known
            return where, np.zeros(len(where), dtype=bool)
        known = (where < len(self.ids)) & (self.ids[np.minimum(where, len(self.ids) - 1)] == ids)
        return where, known

    def segment_of_rows(self, rows: np.ndarray) -> np.ndarray:
        starts = np.asarray([segment.info.first_row for segment in self.segments])
        return np.searchsorted(starts, rows, side="right") - 1

    def embeddings_of(self, ids: np.ndarray, dtype: type[np.floating] = np.float32) -> np.ndarray:
        """(n, d) stored embeddings of existing item ids, read from their segments: float32, or float16 as
        stored (a merge copies them so, without widening each value and narrowing it back)."""
        rows = self.rows_of(np.asarray(ids, dtype=np.int64))
        out = np.empty((len(rows), self.segments[0].embeddings.shape[1]), dtype)
        where = self.segment_of_rows(rows)
        for position in np.unique(where):
            mask = where == position
            segment = self.segments[position]
            out[mask] = segment.embeddings[rows[mask] - segment.info.first_row]
        return out

    def split(self, ids: np.ndarray) -> list[np.ndarray]:
        """Live ``ids`` (ascending) grouped by the segment that holds them."""
        where = self.segment_of_rows(self.rows_of(ids)) if len(ids) else np.zeros(0, np.int64)
        return [ids[where == position] for position in range(len(self.segments))]

    def append(self, segment: Segment, ids: np.ndarray, rows: np.ndarray) -> None:
        """A new delta with new items (new ids are above every existing one; ids given by a copy of another
        index may not be, and are sorted in)."""
        self.segments.append(segment)
        self.ids, self.rows = np.concatenate([self.ids, ids]), np.concatenate([self.rows, rows])
        if len(ids) and len(self.ids) > len(ids) and ids.min() < self.ids[: len(self.ids) - len(ids)].max():
            order = np.argsort(self.ids, kind="stable")
            self.ids, self.rows = self.ids[order], self.rows[order]

    def replace(self, positions: tuple[int, ...], merged: Segment, ids: np.ndarray, rows: np.ndarray) -> None:
        """The segments at ``positions`` became ``merged`` (the new base if it replaces the base), which
        holds the live ``ids`` (ascending) at ``rows``."""
        kept = [segment for position, segment in enumerate(self.segments) if position not in positions]
        self.segments = [merged, *kept] if 0 in positions else [*kept, merged]
        self.rows = self.rows.copy()
        self.rows[np.searchsorted(self.ids, ids)] = rows

    def drop(self, ids: np.ndarray) -> None:
        """Removed items become tombstones of their segments."""
        where = self.segment_of_rows(self.rows_of(ids))
        for position in np.unique(where):
            segment = self.segments[position]
            segment.set_dead(np.union1d(segment.dead, ids[where == position]))
        keep = ~np.isin(self.ids, ids)
        self.ids, self.rows = self.ids[keep], self.rows[keep]


@dataclass(frozen=True)
class _Context:
    index_dir: Path
    manifest: IndexManifest
    base_generation: int


def load_segment_set(index_dir: Path, manifest: IndexManifest, db: ItemsDb) -> tuple[SegmentSet, list[int]]:
    """(the loaded segments, positions of the segments re-indexed in memory and not yet saved)."""
    context = _Context(Path(index_dir), manifest, base_generation(db))
    ids, rows = db.id_rows()
    base_embeddings = load_embeddings(base_file(index_dir, context.base_generation, EMBEDDINGS_NAME), manifest.dim)
    infos = [SegmentInfo(BASE, 0, len(base_embeddings)), *committed_deltas(db)]
    if len(rows) and (rows.max() >= infos[-1].end_row or rows.min() < 0):
        raise IndexFormatError(f"{index_dir / EMBEDDINGS_NAME} has fewer rows than items.sqlite references; {REBUILD}")
    segments, stale = [], []
    for position, info in enumerate(infos):
        in_range = (rows >= info.first_row) & (rows < info.end_row)
        embeddings = base_embeddings if info.name == BASE else _delta_embeddings(context, info)
        segment, rebuilt = _load_segment(context, info, embeddings, ids[in_range], rows[in_range])
        segments.append(segment)
        stale += [position] if rebuilt else []
    return SegmentSet(segments, ids, rows), stale


def _delta_embeddings(context: _Context, info: SegmentInfo) -> np.ndarray:
    path = segment_dir(context.index_dir, info.name) / EMBEDDINGS_NAME
    embeddings = load_embeddings(path, context.manifest.dim)
    if len(embeddings) != info.rows:
        raise IndexFormatError(f"{path} holds {len(embeddings)} rows, items.sqlite expects {info.rows}; {REBUILD}")
    return embeddings


def _load_segment(
    context: _Context, info: SegmentInfo, embeddings: np.ndarray, live: np.ndarray, rows: np.ndarray
) -> tuple[Segment, bool]:
    """The segment and whether its faiss indexes had to be rebuilt from its embeddings."""
    manifest = context.manifest
    kinds = _kinds(manifest) if info.name == BASE else delta_kinds()
    indexes = _read_indexes(context, info)
    rebuilt = indexes is None or not all(np.isin(live, id_map_ids(index)).all() for index in indexes)
    if indexes is None or rebuilt:
        vectors = np.asarray(embeddings[rows - info.first_row], dtype=np.float32)
        indexes = index_segment(kinds, vectors, live, manifest.binarization_threshold)
    segment = Segment(info, embeddings, indexes[0], indexes[1], *kinds)
    segment.set_dead(np.setdiff1d(segment.ids, live))
    return segment, rebuilt


def _read_indexes(context: _Context, info: SegmentInfo) -> tuple[Any, Any] | None:
    """Both faiss indexes; None for a delta whose files were never written (its add was interrupted)."""
    manifest = context.manifest
    if info.name == BASE:
        paths = [
            base_file(context.index_dir, context.base_generation, n) for n in (FLOAT_INDEX_NAME, BINARY_INDEX_NAME)
        ]
        return read_faiss_files(paths[0], paths[1], manifest.dim, manifest.bits)
    directory = segment_dir(context.index_dir, info.name)
    if not faiss_files_exist(directory):
        return None
    return read_faiss_files(directory / FLOAT_INDEX_NAME, directory / BINARY_INDEX_NAME, manifest.dim, manifest.bits)


def _kinds(manifest: IndexManifest) -> tuple[IndexKind, IndexKind]:
    return float_kind(manifest.float_kind), binary_kind(manifest.binary_kind)
