"""Copies in a gallery: ``retrieval index duplicates``, ``GET /duplicates`` and ``GET /items/{id}/duplicates``.

The groups are the connected components of the pairs of items whose embeddings clear the copy threshold
(``search.copy_join``'s self-join on the binary codes, re-checked on the stored float embeddings), largest
first. An item's own copies are its float neighbours at or above the threshold. The codes are made from the
stored embeddings a block at a time, so memory is the codes and the pairs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.table_files import csv_text
from retrieval.indexing.exported_model.onnx_embedder import load_model_manifest
from retrieval.indexing.exported_model.resolution import resolve_query_model
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.copy_groups import copy_groups
from retrieval.indexing.search.copy_join import DEFAULT_K, near_copy_pairs
from retrieval.indexing.search.copy_thresholds import CopyThresholds, copy_thresholds
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.shared.items.items_db import Hit, Item
from retrieval.indexing.store.shared.store_protocol import Store
from retrieval.indexing.usecases.inputs import PathLike

CODE_BLOCK = 65536
ITEM_COPIES_K = 100
"""``item_duplicates`` looks for copies among this many nearest items."""


@dataclass(frozen=True)
class DuplicateGroups:
    """Groups of item ids that are copies of one another (each sorted by id), largest first."""

    groups: list[list[int]]
    thresholds: CopyThresholds
    items: int

    @property
    def duplicated_items(self) -> int:
        return sum(len(group) for group in self.groups)

    def summary(self) -> str:
        return (
            f"{len(self.groups)} groups of copies hold {self.duplicated_items} of {self.items} items "
            f"(largest: {len(self.groups[0]) if self.groups else 0})"
        )


def store_thresholds(store: Store, threshold: float | None = None) -> CopyThresholds:
    """``threshold`` (checked) or the one the index's model measured."""
    model_dir = resolve_query_model(store.index_dir, store.manifest.model_dir)
    return copy_thresholds(load_model_manifest(model_dir).duplicates, threshold)


def store_duplicate_groups(
    store: Store, threshold: float | None = None, *, k: int = DEFAULT_K, progress: bool = False
) -> DuplicateGroups:
    """The groups of copies among ``store``'s items."""
    thresholds = store_thresholds(store, threshold)
    ids = np.asarray(store.ids(), np.int64)
    codes = (
        np.concatenate(
            [
                binarize(_vectors(store, ids[i : i + CODE_BLOCK]), store.manifest.binarization_threshold)
                for i in range(0, len(ids), CODE_BLOCK)
            ]
        )
        if len(ids)
        else np.empty((0, 1), np.uint8)
    )
    pairs = near_copy_pairs(
        codes,
        store.manifest.bits,
        thresholds.binary,
        embeddings=lambda rows: _vectors(store, ids[rows]),
        float_threshold=thresholds.cosine,
        k=k,
        progress=progress,
    )
    groups = [sorted(ids[group].tolist()) for group in copy_groups(pairs.first, pairs.second, len(ids))]
    return DuplicateGroups(groups, thresholds, len(ids))


@dataclass(frozen=True)
class ItemCopies:
    """An item's copies (best first) and the cosine similarity they reached."""

    threshold: float
    hits: list[Hit]


def item_duplicates(store: Store, item_id: int, threshold: float | None = None) -> ItemCopies:
    """The items that are copies of ``item_id`` (its float neighbours at or above the threshold), best first;
    an ItemNotFoundError for an unknown id."""
    cosine = store_thresholds(store, threshold).cosine
    results = store.search(store.embeddings_of([item_id]), min(ITEM_COPIES_K + 1, store.count), kind="float")
    return ItemCopies(cosine, [hit for hit in store.hits(results, 0, exclude=item_id) if hit.score >= cosine])


def find_index_duplicates(
    index: PathLike, out: PathLike | None = None, *, threshold: float | None = None, progress: bool = True
) -> DuplicateGroups:
    """``retrieval index duplicates``: the groups of copies of an index, written to ``out`` as CSV (group, size,
    id, key, path, label: one row per item, the groups largest first) when given."""
    with open_store(Path(index)) as store:
        found = store_duplicate_groups(store, threshold, progress=progress)
        if out is not None:
            atomic_write_text(Path(out), csv_text(_group_columns(store, found.groups)))
    return found


def _group_columns(store: Store, groups: list[list[int]]) -> dict[str, list[object]]:
    rows = [(number, len(group), item) for number, group in enumerate(groups, 1) for item in store.items(group)]
    return {
        "group": [number for number, _, _ in rows],
        "size": [size for _, size, _ in rows],
        "id": [item.id if item else None for _, _, item in rows],
        "key": [item.key if item else None for _, _, item in rows],
        "path": [item.path if item else None for _, _, item in rows],
        "label": [item.label if item else None for _, _, item in rows],
    }


def _vectors(store: Store, ids: np.ndarray) -> np.ndarray:
    return np.asarray(store.embeddings_of(ids), np.float32)


@dataclass(frozen=True)
class GroupFilter:
    """Which groups ``GET /duplicates`` shows: at least ``min_size`` items, one of them labelled ``label``,
    and (``mixed_labels``) items of more than one label, the possible label noise."""

    min_size: int = 2
    label: str | None = None
    mixed_labels: bool = False

    def select(self, store: Store, groups: list[list[int]]) -> list[tuple[int, list[Item]]]:
        """(group number from 1, its items) of the groups that pass, in the groups' order."""
        chosen = []
        for number, group in enumerate(groups, 1):
            if len(group) < self.min_size:
                continue
            items = [item for item in store.items(group) if item is not None]
            labels = {item.label for item in items}
            if (self.label is None or self.label in labels) and (not self.mixed_labels or len(labels) > 1):
                chosen.append((number, items))
        return chosen


class GroupCache:
    """The last groups computed for a store, kept until it changes (ids only grow, so its item count and
    largest id tell) or another threshold is asked; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[object, ...] | None = None
        self._groups: DuplicateGroups | None = None

    def groups(self, store: Store, threshold: float | None = None) -> DuplicateGroups:
        ids = store.ids()
        key = (id(store), store.manifest.build_id, len(ids), int(ids[-1]) if len(ids) else 0, threshold)
        with self._lock:
            if self._key != key or self._groups is None:
                self._groups, self._key = store_duplicate_groups(store, threshold), key
            return self._groups
