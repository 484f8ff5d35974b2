"""An index directory opened for searching and updating: faiss segments + SQLite + stored embeddings.

Layout (names in ``artifact_names``): ``manifest.json``, ``items.sqlite``, ``model/`` (a copy of the
export, so the directory is self-contained), the base segment's ``float.faiss``, ``binary.faiss`` and
``embeddings.f16.npy``, and ``segments/NAME/`` with the same three files for each delta segment
(``segments.py``: an add writes a delta, a remove leaves tombstones, a compaction makes a new base).

Crash safety of updates (one generation each): new files first (an add's delta embeddings, a
compaction's merged segment; harmless to the old state, nothing refers to them), then ONE SQLite
transaction with the items, the segment list and generation g+1 (the commit point), then the rest
(an add's delta faiss files; a compaction moves its new base in place and deletes merged deltas),
then the manifest with generation g+1. ``open`` repairs what an interrupted update left after its
commit point: it re-indexes a delta without faiss files from its embeddings, finishes moving a new
base in place, and saves the manifest with the committed generation. What a writer left before its
commit point is deleted by the next writer.

Not thread-safe: callers that share a store between threads (the service) hold a lock.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from retrieval.indexing.common.artifact_names import ITEMS_DB_NAME
from retrieval.indexing.common.errors import (
    DataError,
    IndexFormatError,
    ItemNotFoundError,
)
from retrieval.indexing.search.binary import binarize, hamming_to_similarity
from retrieval.indexing.search.knn import Metric
from retrieval.indexing.search.results import PAD_ID, SearchResults
from retrieval.indexing.store.files.faiss_gpu import Searcher, binary_searcher, float_searcher
from retrieval.indexing.store.files.filtered_search import batch_selector, exact_selected, selected_search
from retrieval.indexing.store.files.segment_files import write_faiss_files
from retrieval.indexing.store.files.segment_searcher import empty_results, merge_top_k, search_live
from retrieval.indexing.store.files.segment_set import SegmentSet, load_segment_set
from retrieval.indexing.store.files.segments import (
    Segment,
    base_generation,
    finish_base_swap,
    remove_uncommitted,
    segment_dir,
    staged_base_dir,
)
from retrieval.indexing.store.files.store_updates import CompactionResult, StoreUpdates
from retrieval.indexing.store.shared.item_filter import ItemFilter
from retrieval.indexing.store.shared.items_db import Item, ItemsDb
from retrieval.indexing.store.shared.manifest import IndexManifest, load_index_manifest
from retrieval.indexing.store.shared.store_checks import checked_queries, rerank_shortlist, validate_labels
from retrieval.indexing.store.shared.write_lock import exclusive_writer

_log = logging.getLogger(__name__)
_OPEN_ATTEMPTS = 3  # an update committing while we read is retried (its files moved under us)
__all__ = ["CompactionResult", "IndexStore", "validate_labels"]


class IndexStore(StoreUpdates):
    """Search, look up, add and remove items of one index directory."""

    def __init__(self, index_dir: Path, manifest: IndexManifest, db: ItemsDb, segments: SegmentSet) -> None:
        self.index_dir = Path(index_dir)
        self.manifest = manifest
        self._db = db
        self._set = segments
        self._base_searchers()

    # ----- opening -----------------------------------------------------------------------
    @classmethod
    def open(cls, index_dir: Path, *, expected_model_sha256: str | None = None, force: bool = False) -> IndexStore:
        """Open (and, after an interrupted update, repair) an index directory."""
        index_dir = Path(index_dir)
        manifest = load_index_manifest(index_dir)
        if expected_model_sha256 and expected_model_sha256 != manifest.model_sha256 and not force:
            raise IndexFormatError(
                f"index was built with model {manifest.model_sha256[:12]} but the query model is "
                f"{expected_model_sha256[:12]}; rebuild the index or pass --force"
            )
        db = ItemsDb.open(index_dir / ITEMS_DB_NAME)
        try:
            return cls._loaded(index_dir, manifest, db)
        except BaseException:
            db.close()
            raise

    @classmethod
    def _loaded(cls, index_dir: Path, manifest: IndexManifest, db: ItemsDb) -> IndexStore:
        for attempt in range(_OPEN_ATTEMPTS):
            generation = db.generation
            try:
                segments, stale = load_segment_set(index_dir, manifest, db)
                break
            except IndexFormatError:
                if attempt == _OPEN_ATTEMPTS - 1 or db.generation == generation:
                    raise
                manifest = load_index_manifest(index_dir)
        store = cls(index_dir, manifest, db, segments)
        pending_swap = staged_base_dir(index_dir, base_generation(db)).is_dir()
        if stale or pending_swap or generation != manifest.generation:
            store._repair(stale, generation)
        return store

    def _repair(self, stale: list[int], generation: int) -> None:
        """Save what ``open`` re-indexed and the committed generation's manifest (with the writer lock);
        on a read-only mount the repaired copy is served from memory."""
        _log.warning("%s: an update was interrupted after its commit; finishing it", self.index_dir)
        try:
            with exclusive_writer(self.index_dir):
                if self._db.generation != generation:
                    return  # another writer has moved on since we read; its state is complete
                finish_base_swap(self.index_dir, base_generation(self._db))
                remove_uncommitted(self.index_dir, self._set.deltas, base_generation(self._db))
                for position in stale:
                    segment = self._set.segments[position]
                    write_faiss_files(segment_dir(self.index_dir, segment.info.name), *_indexes(segment))
                self._save_manifest(generation, len(self._db.labels()))
        except OSError as error:  # e.g. a read-only mount: serve the repaired copy from memory
            _log.warning("%s: could not save the repaired index (%s)", self.index_dir, error)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> IndexStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- reading -----------------------------------------------------------------------
    def ids(self) -> np.ndarray:
        """All item ids, ascending."""
        return self._set.ids.copy()

    def items(self, ids: Sequence[int]) -> list[Item | None]:
        """Items in the order of ``ids``; ``None`` for ids that do not exist (e.g. faiss's -1)."""
        return self._db.items(ids)

    def item(self, item_id: int) -> Item:
        (found,) = self._db.items([item_id])
        if found is None:
            raise ItemNotFoundError(f"there is no item {item_id} in the index")
        return found

    def hits(
        self, results: SearchResults, row: int = 0, *, exclude: int | None = None, limit: int | None = None
    ) -> list[tuple[Item, float]]:
        """(item, score) pairs of one result row, best first: padding, ``exclude`` and ids gone since
        the search are dropped, and at most ``limit`` are kept. The one ids -> items path."""
        pairs = [
            (int(i), float(s))
            for i, s in zip(results.ids[row], results.scores[row], strict=True)
            if i != PAD_ID and i != exclude
        ]
        items = self.items([item_id for item_id, _ in pairs])
        found = [(item, score) for item, (_, score) in zip(items, pairs, strict=True) if item is not None]
        return found[:limit] if limit is not None else found

    def paths_in_use(self, paths: Sequence[str]) -> set[str]:
        """Which of ``paths`` some item of the index still points to."""
        return self._db.paths_in_use(list(paths)) if paths else set()

    def all_items(self) -> list[Item]:
        """Every item, ascending by id."""
        return self._db.all_items()

    def embedding(self, item_id: int) -> np.ndarray:
        """The stored float embedding (float32 from float16) of one item."""
        return self.embeddings_of([item_id])[0]

    def embeddings_of(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Stored embeddings (n, d) float32 of existing item ids."""
        return self._set.embeddings_of(np.asarray(ids, dtype=np.int64))

    # ----- searching ---------------------------------------------------------------------
    def search(
        self,
        vectors: np.ndarray,
        k: int,
        *,
        kind: Literal["float", "binary"] = "float",
        rerank: int | None = None,
        where: ItemFilter | None = None,
    ) -> SearchResults:
        """Top-``k`` item ids per query row, best first (``PAD_ID`` where an approximate index found fewer).

        Scores: inner product for float and for re-ranked binary results; ``1 - 2 * hamming /
        bits`` for plain binary results. ``rerank=N`` re-orders a binary top-N shortlist (over all
        segments) by the exact inner product with the stored (float16) embeddings. ``where`` keeps
        only the items that pass the filter (``filtered_search``): min(k, matches) results per row.
        """
        queries = checked_queries(vectors, k, dim=self.dim, count=self.count, index_dir=self.index_dir)
        if kind not in ("float", "binary"):
            raise DataError(f"unknown search kind {kind!r}; use 'float' or 'binary'")
        allowed = self._db.matching_ids(where) if where is not None else None
        total = self.count if allowed is None else len(allowed)
        k = min(k, total)
        if k == 0:
            return empty_results(len(queries))
        if kind == "float":
            return self._search_segments(queries, k, "float", allowed)
        codes = binarize(queries, self.manifest.binarization_threshold)
        if rerank:
            shortlist = self._search_segments(codes, min(max(rerank, k), total), "binary", allowed)
            return rerank_shortlist(queries, shortlist.ids, k, self.embeddings_of)
        return self._search_segments(codes, k, "binary", allowed)

    def _search_segments(self, data: np.ndarray, k: int, family: str, allowed: np.ndarray | None) -> SearchResults:
        """Each segment's top-k of its live (and ``allowed``) items, merged into one top-k."""
        groups = self._set.split(allowed) if allowed is not None else None
        parts = []
        for position, segment in enumerate(self._set.segments):
            selected = groups[position] if groups is not None else None
            wanted = min(k, segment.live_count if selected is None else len(selected))
            if wanted:
                parts.append(self._search_segment(position, segment, data, wanted, family, selected))
        return merge_top_k(parts, len(data), k)

    def _search_segment(
        self, position: int, segment: Segment, data: np.ndarray, k: int, family: str, selected: np.ndarray | None
    ) -> SearchResults:
        metric: Metric = "ip" if family == "float" else "hamming"
        to_scores = _same if family == "float" else self._hamming_scores

        def exact(rows: np.ndarray) -> SearchResults:
            allowed = segment.live_ids() if selected is None else selected
            return self._exact_where(data, allowed, k, metric, rows)

        if selected is None:
            searcher = self._searchers[family] if position == 0 else _indexes(segment)[family == "binary"].search
            return search_live(segment, family, searcher, data, k, to_scores=to_scores, exact=exact)
        index = _indexes(segment)[family == "binary"]
        approximate = not (segment.float_kind if family == "float" else segment.binary_kind).exact
        selector = batch_selector(selected)
        return selected_search(
            index, data, k, len(selected), selector, approximate=approximate, to_scores=to_scores, exact=exact
        )

    def _exact_where(
        self, queries: np.ndarray, allowed: np.ndarray, k: int, metric: Metric, rows: np.ndarray
    ) -> SearchResults:
        """Exact search of ``queries[rows]`` over the allowed items' stored embeddings (or their codes)."""
        threshold = self.manifest.binarization_threshold
        vectors = self.embeddings_of if metric == "ip" else lambda ids: binarize(self.embeddings_of(ids), threshold)
        return exact_selected(queries[rows], allowed, k, vectors, metric, dim=self.dim)

    def _hamming_scores(self, distances: np.ndarray) -> np.ndarray:
        return hamming_to_similarity(distances, self.manifest.bits)

    def _base_searchers(self) -> None:
        """The base segment's searchers (on the GPUs where possible)."""
        base = self._set.segments[0]
        self._searchers: dict[str, Searcher] = {
            "float": float_searcher(base.float_index, base.float_kind.name),
            "binary": binary_searcher(base.binary_index, base.binary_kind.name),
        }


def _same(distances: np.ndarray) -> np.ndarray:
    return distances


def _indexes(segment: Segment) -> tuple[Any, Any]:
    return segment.float_index, segment.binary_index
