"""Updates of an open index: ``StoreUpdates``, the component of ``IndexStore`` that writes (add, remove,
compact; the store's methods of those names hand over to it).

Each update is one generation under the protocol of ``index_store``: new files first, then ONE SQLite
transaction (the commit point), then the rest, then the manifest. An add writes one delta segment
(O(added): the base is not touched), a remove only deletes SQLite rows (its items become tombstones),
a replace (an add whose keys items already carry, ``replace=True``) does both in the add's one
transaction and keeps each replaced item's id (the id becomes a tombstone of its old segment and a live
row of the new delta), and a compaction writes the merged segment before its commit (``compaction.py`` says when).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.indexing.common.artifact_names import EMBEDDINGS_NAME
from retrieval.indexing.common.errors import IndexChangedError, IndexNotWritableError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.search.results import SearchResults
from retrieval.indexing.store.files.dba_updates import augment_additions, reaugmented
from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind
from retrieval.indexing.store.files.raw_vectors import keep_only, read_raw, write_raw
from retrieval.indexing.store.files.segment_storage.compaction_plan import CompactionPlan, major_plan, plan_compaction
from retrieval.indexing.store.files.segment_storage.segment_files import (
    load_embeddings,
    write_embeddings,
    write_faiss_files,
)
from retrieval.indexing.store.files.segment_storage.segment_merge import live_ids, write_merged
from retrieval.indexing.store.files.segment_storage.segment_set import SegmentSet
from retrieval.indexing.store.files.segment_storage.segments import (
    Segment,
    SegmentInfo,
    base_generation,
    commit_base_generation,
    commit_deltas,
    delta_kinds,
    delta_name,
    finish_base_swap,
    index_segment,
    remove_uncommitted,
    segment_dir,
    staged_base_dir,
)
from retrieval.indexing.store.shared.index_directory.compaction import CompactionPolicy, CompactionResult
from retrieval.indexing.store.shared.index_directory.index_manifest import (
    IndexManifest,
    load_index_manifest,
    save_index_manifest,
    utc_now,
)
from retrieval.indexing.store.shared.index_directory.write_lock import exclusive_writer, remove_temp_files
from retrieval.indexing.store.shared.items.items_db import ItemsDb
from retrieval.indexing.store.shared.store_checks import check_keys_free, checked_additions

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IdLedger:
    """An index's id counter (AUTOINCREMENT's: removed items included) and idempotency records (JSON text)."""

    last_id: int
    idempotency: dict[str, str]


class StoreUpdates:
    """The writing half of an ``IndexStore``, a component the store holds (not thread-safe, like the store).

    It shares the store's item table and segment set and owns the manifest (each update writes the next
    generation's); it tells the store when the segments changed (``segments_changed``: new searchers)
    and searches through the store's float searchers where a DBA index augments added items
    (``float_search``)."""

    def __init__(
        self,
        index_dir: Path,
        manifest: IndexManifest,
        db: ItemsDb,
        segments: SegmentSet,
        *,
        segments_changed: Callable[[], None],
        float_search: Callable[[np.ndarray, int], SearchResults],
    ) -> None:
        self.index_dir, self.manifest = index_dir, manifest
        self._db, self._set = db, segments
        self._segments_changed, self._float_search = segments_changed, float_search

    def _raw_of(self, ids: np.ndarray) -> np.ndarray:
        """The raw (not augmented) vectors of items of a DBA index."""
        return read_raw(self.index_dir, ids, self._set.embeddings_of(ids))

    def add(
        self,
        records: Sequence[ImageRecord],
        embeddings: np.ndarray,
        *,
        idempotency_key: str | None = None,
        replace: bool = False,
        ids: Sequence[int] | None = None,
        request_digest: str | None = None,
    ) -> list[int]:
        """Add items with their (n, d) embeddings as a new delta segment; returns the new item ids.

        With ``idempotency_key``, the ids and the count after this add are recorded in the same
        transaction as the items (with ``request_digest``, the request's), so a retried request can be
        answered from ``recall`` instead of adding the items twice. A record key that an item already
        carries is a KeyConflictError (nothing is written), unless ``replace``: that item's vector, label and
        metadata are then replaced under its id in the same transaction (one generation: the old item or the
        new one, never both or neither, even after a crash; the old vector becomes a tombstone of its segment).
        ``ids`` gives the items these ids instead of new ones (a copy of another index's items: the
        model upgrade's new generation). An automatic compaction may follow (``compaction.py``)."""
        with self._writing():
            added = self._add(records, embeddings, (idempotency_key, request_digest), ids, replace)
            self._compact_if_due()
            return added

    def adopt_id_ledger(self, ledger: IdLedger) -> None:
        """Continue another index's ids and idempotency records (a model upgrade's new generation, with its
        items copied by id): no id it gave is given again, a retried request is still answered."""
        with self._writing(), self._db.transaction():
            self._db.reserve_ids_through(ledger.last_id)
            for key, result in ledger.idempotency.items():
                self._db.remember_json(key, result)

    def remove(self, ids: Sequence[int]) -> int:
        """Remove items by id (unknown ids are ignored); returns how many were removed. The items become
        tombstones of their segments; an automatic compaction may follow."""
        with self._writing():
            removed = self._remove(ids)
            self._compact_if_due()
            return removed

    def compact(
        self, *, policy: CompactionPolicy | None = None, kinds: tuple[str, str] | None = None
    ) -> CompactionResult:
        """Merge the base, every delta and no tombstone into a new base (nothing to do for a compact
        index); ``policy`` replaces the stored thresholds of automatic compaction, ``kinds`` (float,
        binary) the index kinds of the base, which is then rebuilt even when compact."""
        started = time.perf_counter()
        before = (len(self._set.segments), self._set.tombstones)
        with self._writing():
            if policy is not None:
                self.manifest = self.manifest.model_copy(update={"compaction": policy})
            new_kinds = kinds is not None and kinds != (self.manifest.float_kind, self.manifest.binary_kind)
            if kinds is not None:  # an unknown name lists the known ones
                names = {"float_kind": float_kind(kinds[0]).name, "binary_kind": binary_kind(kinds[1]).name}
                self.manifest = self.manifest.model_copy(update=names)
            if before != (1, 0) or new_kinds:
                self._compact(major_plan(len(self._set.segments)))
            else:
                self.manifest = save_index_manifest(self.index_dir, self.manifest)
        after = (len(self._set.segments), self._set.tombstones)
        return CompactionResult(*before, *after, time.perf_counter() - started)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the cross-process writer lock and check that the directory on disk is still the
        generation this store extends; a failed write (read-only mount, full disk) is an
        IndexNotWritableError."""
        try:
            with exclusive_writer(self.index_dir):
                self._check_unchanged_on_disk()
                remove_temp_files(self.index_dir)  # only writers write there, and we are the only one
                remove_uncommitted(self.index_dir, self._set.deltas, base_generation(self._db))
                yield
        except OSError as error:
            raise IndexNotWritableError(
                f"cannot write to the index directory {self.index_dir} ({error.strerror or error}); "
                "mount it writable to add or remove items"
            ) from None

    def _check_unchanged_on_disk(self) -> None:
        on_disk = load_index_manifest(self.index_dir)
        mine = (self.manifest.generation, self.manifest.build_id, self.manifest.created_at)
        theirs = (on_disk.generation, on_disk.build_id, on_disk.created_at)
        if theirs != mine or self._db.generation != self.manifest.generation:
            raise IndexChangedError(
                f"{self.index_dir} was changed by another writer (generation {on_disk.generation} built "
                f"{on_disk.created_at} on disk, {self.manifest.generation} built {self.manifest.created_at} "
                "here); reopen it (the service: POST /admin/reload) and retry"
            )

    def _taken_ids(self, records: Sequence[ImageRecord], replace: bool) -> list[int | None]:
        """Per record, the id of the item whose key it takes over (None: a new item); a key in use is a
        KeyConflictError unless ``replace``. A replaced item keeps its id (an upsert, as in Qdrant or Milvus)."""
        taken = self._db.ids_of_keys([record.key for record in records if record.key is not None])
        if not replace:
            check_keys_free([record.key for record in records], taken)
        return [taken.get(record.key) if record.key is not None else None for record in records]

    def _add(
        self,
        records: Sequence[ImageRecord],
        embeddings: np.ndarray,
        remembered: tuple[str | None, str | None],
        given: Sequence[int] | None,
        replace: bool,
    ) -> list[int]:
        vectors = raw = checked_additions(records, embeddings, self.manifest.dim)
        if not records:
            return []
        kept = self._taken_ids(records, replace)
        replaced = np.asarray(sorted(i for i in kept if i is not None), dtype=np.int64)
        old_labels = self._db.labels_of(replaced.tolist())
        dba = self.manifest.postprocess.dba
        if dba is not None:  # augmented like the build's items; the old items stay as they are
            vectors = augment_additions(raw, dba, self._float_search, self._raw_of, self._set.count)
        generation = self.manifest.generation + 1
        info = SegmentInfo(delta_name(generation), self._set.next_row, len(records))
        directory = segment_dir(self.index_dir, info.name)
        write_embeddings(directory, vectors)
        new_labels = {label for label in {record.label for record in records} if not self._db.has_label(label)}
        with self._db.transaction():
            self._db.delete(replaced.tolist())
            ids = self._db.insert(records, range(info.first_row, info.end_row), given if given is not None else kept)
            commit_deltas(self._db, [*self._set.deltas, info])
            self._db.set_generation(generation)
            if (key := remembered[0]) is not None:
                result = {"ids": ids, "count": self._set.count - len(replaced) + len(ids)}
                self._db.remember(key, {**result, "request": remembered[1]} if remembered[1] else result)
        self._set.drop(replaced)
        gone = sum(not self._db.has_label(label) for label in old_labels)
        id_array = np.asarray(ids, dtype=np.int64)
        if dba is not None:
            write_raw(self.index_dir, generation, id_array, raw)
        float_index, binary_index = index_segment(
            delta_kinds(), vectors, id_array, self.manifest.binarization_threshold
        )
        write_faiss_files(directory, float_index, binary_index)
        stored = load_embeddings(directory / EMBEDDINGS_NAME, self.manifest.dim)
        segment = Segment(info, stored, float_index, binary_index, *delta_kinds())
        self._set.append(segment, id_array, np.arange(info.first_row, info.end_row, dtype=np.int64))
        self._segments_changed()
        self.save_manifest(generation, self.manifest.num_labels + len(new_labels) - gone)
        return ids

    def _remove(self, ids: Sequence[int]) -> int:
        wanted = np.unique(np.asarray(list(ids), dtype=np.int64))
        present = wanted[np.isin(wanted, self._set.ids)]
        if len(present) == 0:
            return 0
        labels = self._db.labels_of(present.tolist())
        generation = self.manifest.generation + 1
        with self._db.transaction():
            removed = self._db.delete(present.tolist())
            self._db.set_generation(generation)
        self._set.drop(present)
        gone = sum(not self._db.has_label(label) for label in labels)
        self.save_manifest(generation, self.manifest.num_labels - gone)
        return removed

    def _compact_if_due(self) -> None:
        """Run the compaction the stored policy asks for; a failure leaves the committed update intact."""
        plan = plan_compaction(self.manifest.compaction, self._set.sizes())
        if plan is None:
            return
        try:
            self._compact(plan)
        except OSError as error:
            _log.warning("%s: automatic compaction failed (%s); the update itself is saved", self.index_dir, error)

    def _compact(self, plan: CompactionPlan) -> None:
        """Merge the planned segments into a new base (major) or a new delta, as one generation."""
        generation = self.manifest.generation + 1
        live = sum(self._set.segments[p].live_count for p in plan.positions)
        if plan.major:
            target = SegmentInfo("", 0, live)
            directory = staged_base_dir(self.index_dir, generation)
            kinds = (float_kind(self.manifest.float_kind), binary_kind(self.manifest.binary_kind))
        else:
            target = SegmentInfo(delta_name(generation), self._set.next_row, live)
            directory, kinds = segment_dir(self.index_dir, target.name), delta_kinds()
        dba = self.manifest.postprocess.dba if plan.major else None
        vectors = None
        if dba is not None:  # a full compaction re-augments every live item from its raw vector
            vectors = reaugmented(self.index_dir, generation, live_ids(self._set, plan.positions), self._raw_of, dba)
        threshold = self.manifest.binarization_threshold
        merged = write_merged(self._set, plan.positions, target, directory, kinds, threshold, vectors)
        kept = [info for p, info in enumerate(self._set.deltas, start=1) if p not in plan.positions]
        moved = self._set.rows_of(merged.ids) != merged.rows  # a major merge of adds keeps most rows
        with self._db.transaction():
            self._db.set_rows(merged.ids[moved].tolist(), merged.rows[moved].tolist())
            commit_deltas(self._db, kept if plan.major else [*kept, target])
            if plan.major:
                commit_base_generation(self._db, generation)
            self._db.set_generation(generation)
        if plan.major:
            finish_base_swap(self.index_dir, generation)  # the memory map follows its file
        if dba is not None:
            keep_only(self.index_dir, generation)
        remove_uncommitted(self.index_dir, kept if plan.major else [*kept, target], base_generation(self._db))
        self._set.replace(plan.positions, merged.segment, merged.ids, merged.rows)
        self._segments_changed()
        self.save_manifest(generation, self.manifest.num_labels)

    def save_manifest(self, generation: int, num_labels: int) -> None:
        update = {
            "generation": generation,
            "count": self._set.count,
            "num_labels": num_labels,
            "updated_at": utc_now(),
            "delta_segments": len(self._set.segments) - 1,
            "tombstones": self._set.tombstones,
        }
        self.manifest = self.manifest.model_copy(update=update)
        self.manifest = save_index_manifest(self.index_dir, self.manifest)
