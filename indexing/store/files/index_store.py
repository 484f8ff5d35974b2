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
commit point is deleted by the next writer; its temporary files also by the next ``open`` that finds
no writer running.

Not thread-safe: callers that share a store between threads (the service) hold a lock.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.indexing.common.artifact_names import ITEMS_DB_NAME
from retrieval.indexing.common.errors import IndexFormatError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.search.results import SearchResults
from retrieval.indexing.store.files.faiss_search.filtered_search import StoredVectors
from retrieval.indexing.store.files.faiss_search.segment_searcher import SegmentSearcher
from retrieval.indexing.store.files.segment_storage.segment_files import write_faiss_files
from retrieval.indexing.store.files.segment_storage.segment_set import SegmentSet, load_segment_set
from retrieval.indexing.store.files.segment_storage.segments import (
    Segment,
    base_generation,
    finish_base_swap,
    remove_uncommitted,
    segment_dir,
    staged_base_dir,
)
from retrieval.indexing.store.files.store_updates import IdLedger, StoreUpdates
from retrieval.indexing.store.shared.index_directory.compaction import CompactionPolicy, CompactionResult
from retrieval.indexing.store.shared.index_directory.index_manifest import (
    IndexManifest,
    check_model,
    load_index_manifest,
)
from retrieval.indexing.store.shared.index_directory.write_lock import (
    exclusive_writer,
    remove_temp_files,
    writer_if_free,
)
from retrieval.indexing.store.shared.items.item_filter import ItemFilter, Scalar
from retrieval.indexing.store.shared.items.items_db import Item, ItemsDb
from retrieval.indexing.store.shared.store_base import StoreBase
from retrieval.indexing.store.shared.store_protocol import AddOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

_log = logging.getLogger(__name__)


_OPEN_ATTEMPTS = 3  # an update committing while we read is retried (its files moved under us)
Allowed = np.ndarray | None
"""The ids a search may return (ascending; a filter's matches), or None for every live item."""
_REMEMBERED_FILTERS = 32
"""Filters whose matches a store keeps for its current generation (a service sees the same few often)."""
_REMEMBERED_IDS = 1 << 22
"""At most this many matching ids kept in all (32 MiB)."""


class FilesAddOptions(AddOptions, total=False):
    """``Store.add``'s options and the files backend's own: ``ids`` for the items instead of new ones."""

    ids: Sequence[int] | None


class IndexStore(StoreBase[Allowed]):
    """Search, look up, add and remove items of one index directory. It reads through its item table and
    segment set and writes through ``StoreUpdates`` (``add``, ``remove``, ``compact``, ...), a component
    that shares them and owns the manifest."""

    def __init__(self, index_dir: Path, manifest: IndexManifest, db: ItemsDb, segments: SegmentSet) -> None:
        self.index_dir = Path(index_dir)
        self._db = db
        self._set = segments
        self._searchers: dict[int, dict[SearchKind, SegmentSearcher]] = {}
        self._matches: OrderedDict[tuple[int, str], np.ndarray] = OrderedDict()
        self._updates = StoreUpdates(
            self.index_dir,
            manifest,
            db,
            segments,
            segments_changed=self._segments_changed,
            float_search=lambda queries, k: self._search_kind(SearchKind.FLOAT, queries, k, None),
        )
        self._segments_changed()

    @property
    def manifest(self) -> IndexManifest:  # type: ignore[override]  # StoreBase's attribute, read-only here
        """The manifest of the generation this store holds (each update writes the next one)."""
        return self._updates.manifest

    # ----- opening -----------------------------------------------------------------------
    @classmethod
    def open(cls, index_dir: Path, *, expected_model_sha256: str | None = None, force: bool = False) -> IndexStore:
        """Open (and, after an interrupted update, repair) an index directory."""
        index_dir = Path(index_dir)
        manifest = load_index_manifest(index_dir)
        check_model(manifest, expected_model_sha256, force=force)
        with writer_if_free(index_dir) as free:
            if free:  # no writer is running, so the temporary files here are a killed writer's
                remove_temp_files(index_dir)
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
                self._updates.save_manifest(generation, len(self._db.labels()))
        except OSError as error:  # e.g. a read-only mount: serve the repaired copy from memory
            _log.warning("%s: could not save the repaired index (%s)", self.index_dir, error)

    def close(self) -> None:
        self._db.close()

    # ----- updating (``StoreUpdates``) -------------------------------------------------------
    def add(
        self, records: Sequence[ImageRecord], embeddings: np.ndarray, **options: Unpack[FilesAddOptions]
    ) -> list[int]:
        """Add items with their (n, d) embeddings as a new delta segment; returns the new item ids
        (``StoreUpdates.add``: idempotency, ``replace``, given ``ids``)."""
        return self._updates.add(records, embeddings, **options)

    def remove(self, ids: Sequence[int]) -> int:
        """Remove items by id (unknown ids are ignored); returns how many were removed."""
        return self._updates.remove(ids)

    def compact(
        self, *, policy: CompactionPolicy | None = None, kinds: tuple[str, str] | None = None
    ) -> CompactionResult:
        """Merge every segment into a new base (``StoreUpdates.compact``: a new ``policy``, new ``kinds``)."""
        return self._updates.compact(policy=policy, kinds=kinds)

    def adopt_id_ledger(self, ledger: IdLedger) -> None:
        """Continue another index's ids and idempotency records (``StoreUpdates.adopt_id_ledger``)."""
        self._updates.adopt_id_ledger(ledger)

    def recall(self, idempotency_key: str) -> dict[str, Any] | None:
        """``{"ids": [...], "count": n}`` of the add first made under this key, or None."""
        return self._db.recall(idempotency_key)

    # ----- reading -----------------------------------------------------------------------
    @property
    def count(self) -> int:
        return self._set.count

    def ids(self) -> np.ndarray:
        """All item ids, ascending."""
        return self._set.ids.copy()

    @property
    def segment_count(self) -> int:
        """Segments searched: the base plus the deltas."""
        return len(self._set.segments)

    @property
    def tombstone_count(self) -> int:
        """Removed items still stored in a segment (dropped at search time until a compaction)."""
        return self._set.tombstones

    def _ids_of_stored_keys(self, keys: Sequence[str]) -> dict[str, int]:
        """key -> id of the given stored keys that an item carries."""
        return self._db.ids_of_keys(keys)

    def items(self, ids: Sequence[int]) -> list[Item | None]:
        """Items in the order of ``ids``; ``None`` for ids that do not exist (e.g. faiss's -1)."""
        return self._db.items(ids)

    def paths_in_use(self, paths: Sequence[str]) -> set[str]:
        """Which of ``paths`` some item of the index still points to."""
        return self._db.paths_in_use(list(paths)) if paths else set()

    def all_items(self) -> list[Item]:
        """Every item, ascending by id."""
        return self._db.all_items()

    def scroll(self, where: ItemFilter | None, after: int, limit: int) -> list[Item]:
        """Up to ``limit`` items (ascending ids) above id ``after`` that pass ``where``."""
        allowed, _ = self._scope(where)
        ids = self._set.ids if allowed is None else allowed
        page = ids[np.searchsorted(ids, after, side="right") :][:limit]
        return [item for item in self._db.items(page.tolist()) if item is not None]

    def keys_in_use(self, keys: Sequence[str]) -> set[str]:
        return self._db.keys_in_use(keys)

    def metadata_keys(self) -> list[str]:
        return self._db.metadata_keys()

    def value_counts(self, key: str | None) -> list[tuple[Scalar, int]]:
        return self._db.value_counts(key)

    def embeddings_of(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Stored embeddings (n, d) float32 (from float16) of existing item ids."""
        return self._set.embeddings_of(np.asarray(ids, dtype=np.int64))

    # ----- searching (``StoreBase.search`` calls these) ----------------------------------------
    def is_exact(self, kind: SearchKind) -> bool:
        """Whether the base's index of ``kind`` is exact (deltas always are)."""
        return self._set.segments[0].index_kind(SearchKind.of(kind)).exact

    def _scope(self, where: ItemFilter | None) -> tuple[Allowed, int]:
        """The items that pass ``where`` (ascending ids), or None and every item. Only items this store has
        loaded: another connection may have added items to the item table since (a service's snapshot
        that a reload is replacing), which are not in these segments.

        A filter's matches are remembered for the store's generation (every add, remove and compaction
        makes a new one, and no update changes an item in place), so a repeated filter skips SQLite."""
        if where is None:
            return None, self.count
        key = (self.manifest.generation, repr(where))  # repr tells 1, 1.0 and true apart; == does not
        allowed = self._matches.get(key)
        if allowed is None:
            allowed = self._set.live(self._db.matching_ids(where))  # matching_ids are ascending, so is this
            allowed.setflags(write=False)
            self._remember(key, allowed)
        else:
            self._matches.move_to_end(key)
        return allowed, len(allowed)

    def _remember(self, key: tuple[int, str], allowed: np.ndarray) -> None:
        """Keep ``allowed`` under ``key``, forgetting other generations' and the least recently used."""
        for old in [old for old in self._matches if old[0] != key[0]]:
            del self._matches[old]
        self._matches[key] = allowed
        while len(self._matches) > _REMEMBERED_FILTERS or (
            len(self._matches) > 1 and sum(map(len, self._matches.values())) > _REMEMBERED_IDS
        ):
            self._matches.popitem(last=False)

    def _search_kind(self, kind: SearchKind, data: np.ndarray, k: int, scope: Allowed) -> SearchResults:
        """Each segment's top-k of its live (and allowed) items, merged into one top-k."""
        groups = self._set.split(scope) if scope is not None else None
        parts = []
        for position, segment in enumerate(self._set.segments):
            selected = groups[position] if groups is not None else None
            wanted = min(k, segment.live_count if selected is None else len(selected))
            if wanted:
                parts.append(self._searchers[id(segment)][kind].search(data, wanted, selected))
        return SearchResults.merge_top_k(parts, k)

    def _segments_changed(self) -> None:
        """A searcher per segment and kind: kept for unchanged segments (their GPU copies too), made
        for new ones, dropped with merged ones. (Keys are ``id(segment)``: a kept searcher holds its
        segment, so no new segment can take the id of one still listed.)"""
        stored = StoredVectors(self._set, self.manifest.binarization_threshold, self.manifest.dim)
        searchers = {}
        for segment in self._set.segments:
            kept = self._searchers.get(id(segment))
            if kept is None or kept[SearchKind.FLOAT].segment is not segment:
                kept = {kind: SegmentSearcher(segment, kind, stored, self.manifest.bits) for kind in SearchKind}
            searchers[id(segment)] = kept
        self._searchers = searchers


def committed_manifest(index_dir: Path) -> IndexManifest:
    """The manifest of the generation committed in ``items.sqlite``: when an update was killed between its
    commit and its manifest (the item table is ahead), the index is opened, which finishes and saves it
    (on a read-only mount the repaired manifest is only returned)."""
    manifest = load_index_manifest(Path(index_dir))
    db = ItemsDb.open(Path(index_dir) / ITEMS_DB_NAME)
    try:
        committed = db.generation
    finally:
        db.close()
    if committed == manifest.generation:
        return manifest
    with IndexStore.open(index_dir) as store:
        return store.manifest


def _indexes(segment: Segment) -> tuple[Any, Any]:
    return segment.float_index, segment.binary_index
