"""``Store``: the one interface of an opened index, whichever backend holds its items.

The service, the commands, the evaluation and the Python API use only this; ``IndexStore`` (files:
faiss + SQLite) and ``MilvusStore`` (a Milvus collection) implement all of it, and
``store.backends.open_store`` opens the right one. Not thread-safe: a caller that shares a store
between threads (the service) runs every call on one thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, runtime_checkable

import numpy as np

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.search.kinds import KindName, SearchKind
from retrieval.indexing.search.results import SearchResults
from retrieval.indexing.store.shared.index_directory.compaction import CompactionPolicy, CompactionResult
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest
from retrieval.indexing.store.shared.items.item_filter import ItemFilter, Scalar
from retrieval.indexing.store.shared.items.items_db import Hit, Item

if TYPE_CHECKING:
    from typing_extensions import Unpack


class SearchOptions(TypedDict, total=False):
    """The keyword options of ``Store.search`` (``StoreBase.search`` defines them)."""

    kind: KindName
    rerank: int | None
    where: ItemFilter | None


class AddOptions(TypedDict, total=False):
    """The keyword options of ``Store.add``, declared once for the protocol and its implementations."""

    idempotency_key: str | None  # the ids and count are remembered under it: a retry is answered by ``recall``
    request_digest: str | None  # remembered beside them (``shared.idempotency``): a retry must send the same
    replace: bool  # a record key in use replaces the item holding it instead of a KeyConflictError


@runtime_checkable
class Store(Protocol):
    """Search, look up, add and remove the items of one index."""

    @property
    def index_dir(self) -> Path: ...

    @property
    def manifest(self) -> IndexManifest: ...

    @property
    def count(self) -> int:
        """Items currently searchable."""
        ...

    @property
    def dim(self) -> int: ...

    def search(self, vectors: np.ndarray, k: int, **options: Unpack[SearchOptions]) -> SearchResults:
        """Top-``k`` item ids per query row, best first (see ``StoreBase.search``: its defaults)."""
        ...

    def is_exact(self, kind: SearchKind) -> bool:
        """Whether a search of ``kind`` is exact (else approximate: IVF, HNSW, PQ)."""
        ...

    def ids(self) -> np.ndarray:
        """All item ids, ascending."""
        ...

    def items(self, ids: Sequence[int]) -> list[Item | None]: ...

    def item(self, item_id: int) -> Item: ...

    def ids_of_keys(self, keys: Sequence[str]) -> dict[str, int]:
        """key -> id of the given item keys that an item carries (the others left out)."""
        ...

    def item_by_key(self, key: str) -> Item:
        """The item carrying ``key``, or an ItemNotFoundError."""
        ...

    def all_items(self) -> list[Item]: ...

    def hits(
        self, results: SearchResults, row: int = 0, *, exclude: int | None = None, limit: int | None = None
    ) -> list[Hit]: ...

    def paths_in_use(self, paths: Sequence[str]) -> set[str]: ...

    def scroll(self, where: ItemFilter | None, after: int, limit: int) -> list[Item]:
        """Up to ``limit`` items (ascending ids) above id ``after`` that pass ``where``: ``GET /items``."""
        ...

    def keys_in_use(self, keys: Sequence[str]) -> set[str]:
        """Which of the metadata ``keys`` some item has."""
        ...

    def metadata_keys(self) -> list[str]:
        """Every metadata key some item has, sorted."""
        ...

    def value_counts(self, key: str | None) -> list[tuple[Scalar, int]]:
        """(value, items) of the label (``key`` None) or of a metadata key, most items first: ``GET /labels``."""
        ...

    def embedding(self, item_id: int) -> np.ndarray: ...

    def embeddings_of(self, ids: Sequence[int] | np.ndarray) -> np.ndarray: ...

    def add(self, records: Sequence[ImageRecord], embeddings: np.ndarray, **options: Unpack[AddOptions]) -> list[int]:
        """New ids of the added items; a record key in use is a KeyConflictError unless ``replace``, which
        removes the item holding it (files: in the same transaction)."""
        ...

    def recall(self, idempotency_key: str) -> dict[str, Any] | None: ...

    def remove(self, ids: Sequence[int]) -> int: ...

    def compact(self, *, policy: CompactionPolicy | None = None) -> CompactionResult: ...

    def close(self) -> None: ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None: ...
