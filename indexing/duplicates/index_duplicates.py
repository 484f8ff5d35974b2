"""Copies in a gallery: ``retrieval index duplicates``, ``GET /duplicates`` and ``GET /items/{id}/duplicates``.

The groups are the connected components of the pairs of items whose embeddings clear the copy threshold
(``search.copy_join``'s self-join on the binary codes, re-checked on the stored float embeddings) whose
images' pixels agree (``search.copy_verifier``, reading the items' image paths; an item without a readable
image, e.g. one added by vector, is judged by its embedding alone), largest first. An item's own copies are
its float neighbours at or above the threshold, checked alike. The codes are made from the
stored embeddings a block at a time, so memory is the codes and the pairs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.table_files import csv_text
from retrieval.indexing.duplicates.copy_groups import copy_groups
from retrieval.indexing.duplicates.copy_join import DEFAULT_K, CopyPairs, near_copy_pairs
from retrieval.indexing.duplicates.copy_thresholds import NO_MODEL, CopyThresholds, copy_thresholds
from retrieval.indexing.duplicates.copy_verifier import verify_copies
from retrieval.indexing.exported_model.no_model import has_model
from retrieval.indexing.exported_model.onnx_embedder import load_model_manifest
from retrieval.indexing.exported_model.resolution import resolve_query_model
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.shared.items.items_db import Hit
from retrieval.indexing.store.shared.store_protocol import Store

PathLike = str | Path

CODE_BLOCK = 65536
ITEM_COPIES_K = 100
"""``item_duplicates`` looks for copies among this many nearest items."""


@dataclass(frozen=True)
class DuplicateGroups:
    """Groups of item ids that are copies of one another (each sorted by id), largest first."""

    groups: list[list[int]]
    thresholds: CopyThresholds
    items: int
    checked: str = ""  # what the pixel check of the candidate pairs dropped, in words ("": no check)

    @property
    def duplicated_items(self) -> int:
        return sum(len(group) for group in self.groups)

    def summary(self) -> str:
        return (
            f"{len(self.groups)} groups of copies hold {self.duplicated_items} of {self.items} items "
            f"(largest: {len(self.groups[0]) if self.groups else 0})"
        ) + (f"\n  ({self.checked})" if self.checked else "")


def store_thresholds(store: Store, threshold: float | None = None, *, verify: bool = True) -> CopyThresholds:
    """``threshold`` (checked) or the one the index's model measured, with its pixel check unless ``verify``
    is False."""
    if not has_model(store.manifest.model):  # vectors alone: no model measured one, a given threshold serves
        return copy_thresholds(None, threshold, verify=verify, missing=NO_MODEL)
    model_dir = resolve_query_model(store.index_dir, store.manifest.model_dir)
    return copy_thresholds(load_model_manifest(model_dir).duplicates, threshold, verify=verify)


def store_duplicate_groups(
    store: Store,
    threshold: float | None = None,
    *,
    k: int = DEFAULT_K,
    verify: bool = True,
    progress: bool = False,
) -> DuplicateGroups:
    """The groups of copies among ``store``'s items, the candidate pairs checked on their images' pixels
    (``search.copy_verifier``; an item whose image cannot be read is judged by its embedding alone)."""
    thresholds = store_thresholds(store, threshold, verify=verify)
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
    checked = ""
    if thresholds.pixel is not None:
        verified = verify_copies(pairs, lambda rows: _paths(store, ids[rows]), thresholds.pixel, progress=progress)
        pairs, checked = verified.pairs, verified.summary()
    groups = [sorted(ids[group].tolist()) for group in copy_groups(pairs.first, pairs.second, len(ids))]
    return DuplicateGroups(groups, thresholds, len(ids), checked)


@dataclass(frozen=True)
class ItemCopies:
    """An item's copies (best first) and the cosine similarity they reached."""

    threshold: float
    hits: list[Hit]


def item_duplicates(store: Store, item_id: int, threshold: float | None = None) -> ItemCopies:
    """The items that are copies of ``item_id`` (its float neighbours at or above the threshold whose pixels
    agree, as ``store_duplicate_groups`` checks them), best first; an ItemNotFoundError for an unknown id."""
    thresholds = store_thresholds(store, threshold)
    results = store.search(store.embeddings_of([item_id]), min(ITEM_COPIES_K + 1, store.count), kind="float")
    hits = [hit for hit in store.hits(results, 0, exclude=item_id) if hit.score >= thresholds.cosine]
    if thresholds.pixel is None or not hits:
        return ItemCopies(thresholds.cosine, hits)
    others = np.array([hit.item.id for hit in hits], np.int64)
    candidates = CopyPairs(np.full(len(hits), item_id, np.int64), others, np.zeros(len(hits), np.float32))
    kept = set(verify_copies(candidates, lambda rows: _paths(store, rows), thresholds.pixel).pairs.second.tolist())
    return ItemCopies(thresholds.cosine, [hit for hit in hits if hit.item.id in kept])


def find_index_duplicates(
    index: PathLike,
    out: PathLike | None = None,
    *,
    threshold: float | None = None,
    verify: bool = True,
    progress: bool = True,
) -> DuplicateGroups:
    """``retrieval index duplicates``: the groups of copies of an index, written to ``out`` as CSV (group, size,
    id, key, path, label: one row per item, the groups largest first) when given."""
    with open_store(Path(index)) as store:
        found = store_duplicate_groups(store, threshold, verify=verify, progress=progress)
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


def _paths(store: Store, ids: np.ndarray) -> list[Path | None]:
    """The image paths of items ``ids`` (None for an item with none: one added by vector)."""
    return [Path(item.path) if item is not None and item.path else None for item in store.items(ids.tolist())]


def _vectors(store: Store, ids: np.ndarray) -> np.ndarray:
    return np.asarray(store.embeddings_of(ids), np.float32)


@dataclass(frozen=True)
class GroupFilter:
    """Which groups ``GET /duplicates`` shows: at least ``min_size`` items, one of them labelled ``label``,
    and (``mixed_labels``) items of more than one label, the possible label noise."""

    min_size: int = 2
    label: str | None = None
    mixed_labels: bool = False

    def numbers(self, store: Store, groups: list[list[int]]) -> list[int]:
        """The numbers (from 1, in the groups' order) of the groups that pass; the items' labels are read only
        when a label filter asks for them."""
        sized = [number for number, group in enumerate(groups, 1) if len(group) >= self.min_size]
        if self.label is None and not self.mixed_labels:
            return sized
        return [number for number in sized if self._labels_pass(group_labels(store, groups[number - 1]))]

    def _labels_pass(self, labels: set[str]) -> bool:
        return (self.label is None or self.label in labels) and (not self.mixed_labels or len(labels) > 1)


def group_labels(store: Store, group: list[int]) -> set[str]:
    """The labels the items of a group carry (more than one: possible label noise)."""
    return {item.label for item in store.items(group) if item is not None}


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
