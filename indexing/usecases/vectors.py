"""Vectors in and out of an index: add items by their vectors and search by vectors, the one use case
of the service's JSON ``POST /items`` and ``POST /search``, ``retrieval search --vector``, and the Python
API's ``add(index, vectors=...)`` and ``search(index, vectors=...)``.

Both read top-down: check the model reference and the vectors (``vector_input``: nothing is written
or searched before they pass), then the store's own add (a key in use: a 409 unless ``replace``, which
keeps the item's id) or ``item_search.ranked_pages`` (the path of every search). Binary codes come
from the stored float vectors inside the store, exactly as for an item added by its image.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.item_search import HitPage, ranked_pages, search_warnings
from retrieval.indexing.store.shared.index_directory.write_lock import exclusive_writer
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.store.shared.store_protocol import Store
from retrieval.indexing.usecases.inputs import PathLike
from retrieval.indexing.usecases.vector_input import (
    DEFAULT_LABEL,
    check_model,
    checked_vectors,
    normalised_warning,
    vector_records,
)


@dataclass(frozen=True)
class VectorAdd:
    """Items to add by their vectors: one label per vector (or one for all), optional keys and metadata
    per vector (or one metadata mapping for all); ``model`` names the model that made them (its sha256 or
    a 12-character prefix); ``replace`` lets a key in use be upserted (the item keeps its id)."""

    vectors: Any
    labels: Sequence[str] | str = DEFAULT_LABEL
    keys: Sequence[str | None] | None = None
    metadata: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None
    model: str | None = None
    replace: bool = False


@dataclass(frozen=True)
class VectorAddReport:
    """The items' ids in the order given (a replaced item's own id), the index's size after the add, how
    many vectors had to be normalised and how many items were replaced."""

    ids: list[int]
    count: int
    normalised: int = 0
    replaced: int = 0
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class VectorPages:
    """One page of hits per query vector, and the warnings (an unknown filter key, normalised vectors)."""

    pages: list[HitPage]
    normalised: int = 0
    warnings: list[str] = field(default_factory=list)


def add_vectors_to(store: Store, request: VectorAdd, *, idempotency_key: str | None = None) -> VectorAddReport:
    """Add ``request``'s items to an open store (the caller holds the right to write: the service's write
    lock, or ``add_vectors``'s writer lock); a retry under ``idempotency_key`` gets the first answer."""
    if idempotency_key is not None and (first := store.recall(idempotency_key)) is not None:
        return VectorAddReport(ids=list(first["ids"]), count=int(first["count"]))
    check_model(request.model, store.manifest.model_sha256)
    checked = checked_vectors(request.vectors, store.dim)
    count = len(checked.vectors)
    records = vector_records(count, labels=request.labels, keys=request.keys, metadata=request.metadata)
    before = store.count
    ids = store.add(records, checked.vectors, idempotency_key=idempotency_key, replace=request.replace)
    replaced = before + len(ids) - store.count
    return VectorAddReport(
        ids, store.count, checked.normalised, replaced, normalised_warning(checked.normalised, count)
    )


def add_vectors(index: PathLike, request: VectorAdd) -> VectorAddReport:
    """``add_vectors_to`` the index at ``index``, under its writer lock (the service may write meanwhile)."""
    with exclusive_writer(Path(index)), open_store(Path(index)) as store:
        return add_vectors_to(store, request)


def add(
    index: PathLike,
    vectors: Any,
    *,
    keys: Sequence[str | None] | None = None,
    labels: Sequence[str] | str = DEFAULT_LABEL,
    metadata: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None,
    model: str | None = None,
    replace: bool = False,
) -> VectorAddReport:
    """Add items to an index by their vectors (rows of the index's dimension, made by its model: ``model``,
    its sha256 or a 12-character prefix, is checked when given), with optional keys, labels and metadata;
    ``replace`` upserts the items whose keys are in use (each keeps its id). The Python API's ``add``."""
    request = VectorAdd(vectors, labels, keys, metadata, model, replace)
    return add_vectors(index, request)


def vector_pages(store: Store, vectors: Any, settings: SearchSettings, *, model: str | None = None) -> VectorPages:
    """The hits of each query vector under ``settings`` (an empty index: empty pages), after the checks."""
    check_model(model, store.manifest.model_sha256)
    checked = checked_vectors(vectors, store.dim, what="query vector")
    warnings = [*search_warnings(store, settings), *normalised_warning(checked.normalised, len(checked.vectors))]
    if store.count == 0:
        return VectorPages([HitPage([]) for _ in checked.vectors], checked.normalised, warnings)
    return VectorPages(ranked_pages(store, checked.vectors, settings), checked.normalised, warnings)
