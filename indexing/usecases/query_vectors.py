"""The one place where every kind of ``Query`` becomes vectors (clip-retrieval's ``compute_query``): images
through the model, words through its text tower (``QueryEncoders``: the commands' and the Python API's
``ModelEncoders``), vectors made elsewhere checked and normalised (``vector_input``), vectors the door
embedded itself taken as they are, and stored items (by id or key) their own stored vector, each left out
of its own hits; a search by examples, the candidate vector of its strategy. Queries of one kind are converted together (one batched model call), the rows come back in
the order given. A new kind of query is one converter here and one line in ``_CONVERTERS``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.examples.strategies import NO_POSITIVE, STRATEGIES, Examples
from retrieval.indexing.query.query import Query, QueryKind
from retrieval.indexing.store.shared.store_protocol import Store
from retrieval.indexing.usecases.vector_input import check_model, checked_vectors, normalised_warning


@dataclass(frozen=True)
class EmbeddedImages:
    """Images embedded by a model: the positions of those it could read, their vectors, and the others
    (path, reason)."""

    kept: list[int]
    vectors: np.ndarray
    failures: list[tuple[Path, str]] = field(default_factory=list)


class QueryEncoders(Protocol):
    """What turns images and words into vectors of an index's space (its model and text tower)."""

    def embed_images(self, images: Sequence[Any]) -> EmbeddedImages: ...

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass
class QueryVectors:
    """The queries as vectors (one row each, in the order given, unreadable images left out): the name each
    is shown under, the stored item it is (left out of its own hits; None for the others), the warnings
    (vectors that had to be normalised), the images that could not be read, and the ``Query`` of each row."""

    names: list[str]
    item_ids: list[int | None]
    vectors: np.ndarray
    warnings: list[str] = field(default_factory=list)
    failures: list[tuple[Path, str]] = field(default_factory=list)
    origins: list[Query] = field(default_factory=list)


@dataclass
class _Converted:
    positions: list[int]  # of the queries of one kind that became rows
    names: list[str]
    item_ids: list[int | None]
    vectors: np.ndarray
    warnings: list[str] = field(default_factory=list)
    failures: list[tuple[Path, str]] = field(default_factory=list)
    origins: list[Query] | None = None  # the queries as the steps should see them (None: as given)


def query_vectors(queries: Sequence[Query], store: Store | None, encoders: QueryEncoders | None = None) -> QueryVectors:
    """Every query as a vector (``store``: needed for vectors made elsewhere and stored items; ``encoders``:
    for images and words). A bad query is a DataError naming it; nothing is searched before all pass."""
    rows: list[tuple[int, str, int | None, np.ndarray, Query]] = []
    out = QueryVectors([], [], np.empty((0, 0), np.float32))
    for kind, converter in _CONVERTERS.items():
        positions = [n for n, query in enumerate(queries) if query.kind == kind]
        if not positions:
            continue
        got = converter([queries[n] for n in positions], store, encoders)
        out.warnings += got.warnings
        out.failures += got.failures
        origins = got.origins or [queries[positions[at]] for at in got.positions]
        for at, name, item_id, vector, origin in zip(
            got.positions, got.names, got.item_ids, got.vectors, origins, strict=True
        ):
            rows.append((positions[at], name, item_id, vector, origin))
    rows.sort(key=lambda row: row[0])
    out.names, out.item_ids = [row[1] for row in rows], [row[2] for row in rows]
    out.origins = [row[4] for row in rows]
    out.vectors = np.stack([row[3] for row in rows]).astype(np.float32, copy=False) if rows else out.vectors
    return out


def _images(queries: list[Query], store: Store | None, encoders: QueryEncoders | None) -> _Converted:
    embedded = _needs(encoders, "images").embed_images([query.value for query in queries])
    names = [queries[n].name or _image_name(queries[n].value) for n in embedded.kept]
    return _Converted(embedded.kept, names, [None] * len(names), embedded.vectors, failures=embedded.failures)


def _texts(queries: list[Query], store: Store | None, encoders: QueryEncoders | None) -> _Converted:
    vectors = _needs(encoders, "texts").embed_texts([query.value for query in queries])
    return _Converted(list(range(len(queries))), [query.value for query in queries], [None] * len(queries), vectors)


def _vectors(queries: list[Query], store: Store | None, encoders: QueryEncoders | None) -> _Converted:
    store = _has(store)
    for model in dict.fromkeys(query.model for query in queries):
        check_model(model, store.manifest.model_sha256)
    checked = checked_vectors([query.value for query in queries], store.dim, what="query vector")
    names = [query.name or f"vector {n}" for n, query in enumerate(queries, start=1)]
    warnings = normalised_warning(checked.normalised, len(checked.vectors))
    return _Converted(list(range(len(queries))), names, [None] * len(queries), checked.vectors, warnings)


def _embedded(queries: list[Query], store: Store | None, encoders: QueryEncoders | None) -> _Converted:
    vectors = np.stack([np.asarray(query.value, np.float32).reshape(-1) for query in queries])
    return _Converted(list(range(len(queries))), [query.name for query in queries], [None] * len(queries), vectors)


def _items(queries: list[Query], store: Store | None, encoders: QueryEncoders | None) -> _Converted:
    store = _has(store)
    ids = [query.value if query.kind == "item" else store.item_by_key(query.value).id for query in queries]
    vectors = store.embeddings_of(ids)  # ItemNotFoundError for an unknown id
    names = [store.item(item_id).path for item_id in ids]
    return _Converted(list(range(len(queries))), names, list(ids), np.asarray(vectors, np.float32))


def _examples(queries: list[Query], store: Store | None, encoders: QueryEncoders | None) -> _Converted:
    """Each search by examples as its strategy's candidate vector; its examples resolved for the steps (a
    stored item by id, any other kind as the vector it became), so ``steps.by_examples`` reads no model."""
    vectors, origins = [], []
    for query in queries:
        if not query.positive:
            raise DataError(NO_POSITIVE)
        positive, negative = _resolved(query.positive, store, encoders), _resolved(query.negative, store, encoders)
        examples = Examples.of(_stacked(positive, store), _stacked(negative, store) if negative else None)
        vectors.append(STRATEGIES.get(query.value).candidate_vector(examples))
        origins.append(Query.examples(positive, negative, query.value))
    names = [query.name for query in queries]
    positions = list(range(len(queries)))
    return _Converted(positions, names, [None] * len(queries), np.stack(vectors), origins=origins)


def _resolved(examples: tuple[Query, ...], store: Store | None, encoders: QueryEncoders | None) -> tuple[Query, ...]:
    if any(example.kind == "examples" for example in examples):
        raise DataError("an example cannot itself be a search by examples.")
    if not examples:
        return ()
    got = query_vectors(examples, store, encoders)
    if got.failures:
        raise DataError(f"an example could not be read: {got.failures[0][0]} ({got.failures[0][1]})")
    return tuple(
        Query.item(item_id) if item_id is not None else Query.embedded(vector)
        for item_id, vector in zip(got.item_ids, got.vectors, strict=True)
    )


def _stacked(examples: tuple[Query, ...], store: Store | None) -> np.ndarray:
    ids = [example.value for example in examples if example.kind == "item"]
    stored = dict(zip(ids, _has(store).embeddings_of(ids))) if ids else {}
    return np.stack([stored[q.value] if q.kind == "item" else q.value for q in examples]).astype(np.float32)


def _image_name(image: Any) -> str:
    return str(image) if isinstance(image, str | Path) else ""


def _needs(encoders: QueryEncoders | None, what: str) -> QueryEncoders:
    if encoders is None:
        raise ValueError(f"searching by {what} needs the model's encoders")
    return encoders


def _has(store: Store | None) -> Store:
    if store is None:
        raise ValueError("these queries need the open store")
    return store


_Converter = Callable[[list[Query], Store | None, QueryEncoders | None], _Converted]
_CONVERTERS: dict[QueryKind, _Converter] = {
    "image": _images,
    "text": _texts,
    "vector": _vectors,
    "embedded": _embedded,
    "item": _items,
    "key": _items,
    "examples": _examples,
}
"""Each kind of query, converted in this order (the rows come back in the queries' own order)."""
