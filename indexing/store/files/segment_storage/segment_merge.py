"""Write the live items of some segments as one new segment (the files of a compaction).

The embeddings are copied a chunk at a time (float16 in, float16 out: the stored values are kept
exactly) and the faiss indexes are built from the new file's memory map, so a compaction needs
memory for the new indexes, not for a float32 copy of every embedding (trained kinds, IVF and PQ,
still train on a float32 copy of the items).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.indexing.common.artifact_names import EMBEDDINGS_NAME
from retrieval.indexing.store.files.faiss_kinds import IndexKind
from retrieval.indexing.store.files.segment_storage.segment_files import (
    load_embeddings,
    write_embeddings,
    write_faiss_files,
)
from retrieval.indexing.store.files.segment_storage.segment_set import SegmentSet
from retrieval.indexing.store.files.segment_storage.segments import Segment, SegmentInfo, index_segment


class _StoredRows:
    """The stored embeddings of ``ids`` as an array the chunked writer slices (read per slice, float16 as
    stored)."""

    def __init__(self, segments: SegmentSet, ids: np.ndarray, dim: int) -> None:
        self._segments, self._ids = segments, ids
        self.shape = (len(ids), dim)

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, rows: slice) -> np.ndarray:
        return self._segments.embeddings_of(self._ids[rows], np.float16)


def live_ids(segments: SegmentSet, positions: tuple[int, ...]) -> np.ndarray:
    """The live ids of ``segments.segments[positions]``, ascending: the items a merge of them writes."""
    return np.sort(np.concatenate([segments.segments[p].live_ids() for p in positions]))


@dataclass(frozen=True)
class MergedSegment:
    """A written segment (not yet committed) and the new rows of its items."""

    segment: Segment
    ids: np.ndarray
    rows: np.ndarray


def write_merged(
    segments: SegmentSet,
    positions: tuple[int, ...],
    target: SegmentInfo,
    directory: Path,
    kinds: tuple[IndexKind, IndexKind],
    threshold: float,
    vectors: np.ndarray | None = None,
) -> MergedSegment:
    """Write the live items of ``segments.segments[positions]``, ascending by id, into ``directory``
    as the segment ``target`` (its ``rows`` must be their number); ``vectors`` (one row per such id, in
    that order) replace their stored values (a DBA index re-augmented by a full compaction)."""
    ids = live_ids(segments, positions)
    dim = segments.segments[0].embeddings.shape[1]
    rows = _StoredRows(segments, ids, dim) if vectors is None else vectors
    write_embeddings(directory, rows)  # type: ignore[arg-type]  # sliced like an array
    embeddings = load_embeddings(Path(directory) / EMBEDDINGS_NAME, dim)
    float_index, binary_index = index_segment(kinds, embeddings, ids, threshold)
    write_faiss_files(directory, float_index, binary_index)
    segment = Segment(target, embeddings, float_index, binary_index, *kinds)
    return MergedSegment(segment, ids, target.first_row + np.arange(len(ids), dtype=np.int64))
