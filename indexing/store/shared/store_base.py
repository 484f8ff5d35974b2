"""``StoreBase``: what the files and the Milvus store do the same way, so each backend writes only its own part.

A search reads top-down here: check the queries, resolve the kind and the filter's scope (the
backend's ``_scope``), then float search, binary search, or a binary shortlist re-ranked by the
float inner product (``rerank``); the backend's ``_search_kind`` answers one kind within a scope.
Item lookups (``item``, ``hits``, ``embedding``) are written once over the backend's ``items`` and
``embeddings_of``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from retrieval.indexing.common.errors import ItemNotFoundError
from retrieval.indexing.data.records import normal_key
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.kinds import KindName, SearchKind
from retrieval.indexing.search.results import PAD_ID, SearchResults
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest
from retrieval.indexing.store.shared.items.item_filter import ItemFilter
from retrieval.indexing.store.shared.items.items_db import Hit, Item
from retrieval.indexing.store.shared.rerank import rerank_shortlist, shortlist_ids
from retrieval.indexing.store.shared.store_checks import checked_queries

ScopeT = TypeVar("ScopeT")
"""What a backend searches within: the files backend's allowed ids (None: all), Milvus's filter expression."""
StoreT = TypeVar("StoreT", bound="StoreBase[Any]")


class StoreBase(ABC, Generic[ScopeT]):
    """The shared half of ``IndexStore`` and ``MilvusStore`` (both implement ``store_protocol.Store``)."""

    index_dir: Path
    manifest: IndexManifest

    # ----- what a backend provides --------------------------------------------------------
    @property
    @abstractmethod
    def count(self) -> int:
        """Items currently searchable."""

    @abstractmethod
    def items(self, ids: Sequence[int]) -> list[Item | None]:
        """Items in the order of ``ids``; ``None`` for ids that do not exist (e.g. ``PAD_ID``)."""

    @abstractmethod
    def embeddings_of(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Stored float32 embeddings (n, d) of existing item ids, in the order given."""

    @abstractmethod
    def close(self) -> None:
        """Release the item table or the connection."""

    @abstractmethod
    def _scope(self, where: ItemFilter | None) -> tuple[ScopeT, int]:
        """(what to search within for ``where``, how many results it can give at most)."""

    @abstractmethod
    def _search_kind(self, kind: SearchKind, data: np.ndarray, k: int, scope: ScopeT) -> SearchResults:
        """Top-``k`` (k <= the scope's size) of one kind: ``data`` are float queries or binary codes."""

    def __enter__(self: StoreT) -> StoreT:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- searching -----------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self.manifest.dim

    def search(
        self,
        vectors: np.ndarray,
        k: int,
        *,
        kind: KindName = "float",
        rerank: int | None = None,
        where: ItemFilter | None = None,
    ) -> SearchResults:
        """Top-``k`` item ids per query row, best first (``PAD_ID`` where fewer exist).

        Scores: inner product for float and for re-ranked binary results; ``1 - 2 * hamming /
        bits`` for plain binary results. ``rerank=N`` re-orders a binary top-N shortlist by the exact
        inner product with the stored embeddings. ``where`` keeps only the items that pass the filter.
        """
        queries = checked_queries(vectors, k, dim=self.dim, count=self.count, index_dir=self.index_dir)
        chosen = SearchKind.of(kind)
        scope, size = self._scope(where)
        k = min(k, size)
        if k == 0:
            return SearchResults.empty(len(queries))
        if chosen is SearchKind.FLOAT:
            return self._search_kind(SearchKind.FLOAT, queries, k, scope)
        codes = binarize(queries, self.manifest.binarization_threshold)
        if not rerank:
            return self._search_kind(SearchKind.BINARY, codes, k, scope)
        shortlist = self._search_kind(SearchKind.BINARY, codes, min(max(rerank, k), size), scope)
        candidates = shortlist_ids(shortlist)
        return rerank_shortlist(queries, shortlist, k, candidates, self.embeddings_of(candidates))

    # ----- reading items ---------------------------------------------------------------------
    def item(self, item_id: int) -> Item:
        (found,) = self.items([item_id])
        if found is None:
            raise ItemNotFoundError(f"there is no item {item_id} in the index")
        return found

    def ids_of_keys(self, keys: Sequence[str]) -> dict[str, int]:
        """key -> id of the given item keys that an item carries, each looked up in its stored form (NFC,
        ``normal_key``) and, for a key stored before keys were normalised, as given; the answer is keyed by
        the keys as given."""
        normal = {key: normal_key(key) for key in keys}
        found = self._ids_of_stored_keys(list(dict.fromkeys([*normal.values(), *normal])))
        return {
            key: found[nfc] if nfc in found else found[key] for key, nfc in normal.items() if {nfc, key} & found.keys()
        }

    @abstractmethod
    def _ids_of_stored_keys(self, keys: Sequence[str]) -> dict[str, int]:
        """key -> id of the given stored keys (NFC) that an item carries."""

    def item_by_key(self, key: str) -> Item:
        item_id = self.ids_of_keys([key]).get(key)
        if item_id is None:
            raise ItemNotFoundError(f"there is no item with the key {key!r} in the index")
        return self.item(item_id)

    def embedding(self, item_id: int) -> np.ndarray:
        """The stored float embedding (float32) of one item."""
        return self.embeddings_of([item_id])[0]

    def hits(
        self, results: SearchResults, row: int = 0, *, exclude: int | None = None, limit: int | None = None
    ) -> list[Hit]:
        """(item, score) pairs of one result row, best first: padding, ``exclude`` and ids gone since
        the search are dropped, and at most ``limit`` are kept. The one ids -> items path."""
        pairs = [
            (int(i), float(s))
            for i, s in zip(results.ids[row], results.scores[row], strict=True)
            if i != PAD_ID and i != exclude
        ]
        items = self.items([item_id for item_id, _ in pairs])
        found = [Hit(item, score) for item, (_, score) in zip(items, pairs, strict=True) if item is not None]
        return found[:limit] if limit is not None else found
