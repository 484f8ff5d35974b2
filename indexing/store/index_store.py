"""An index directory opened for searching and updating: faiss + SQLite + stored embeddings.

Layout (names in ``index_manifest``): ``manifest.json``, ``float.faiss``, ``binary.faiss``,
``embeddings.f16.npy`` (float16, one row per item, rows of removed items stay unused),
``items.sqlite`` and ``model/`` (a copy of the export, so the directory is self-contained).

Crash safety of updates: every file is replaced atomically, in this order: embeddings
(a superset of the old rows, harmless to the old state), then ONE SQLite transaction
with the new items and generation g+1 (the commit point), then the faiss files, then
the manifest with generation g+1. ``open`` compares the two generations; if they differ
the update was interrupted after its commit point, and the faiss indexes are rebuilt
from the SQLite rows and the stored embeddings.

Not thread-safe: callers that share a store between threads (the service) hold a lock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Literal

import faiss
import numpy as np

from retrieval.indexing.common.artifact_names import (
    BINARY_INDEX_NAME,
    EMBEDDINGS_NAME,
    FLOAT_INDEX_NAME,
    ITEMS_DB_NAME,
)
from retrieval.indexing.common.atomic_write import atomic_write_with
from retrieval.indexing.common.errors import (
    DataError,
    IndexChangedError,
    IndexFormatError,
    IndexNotWritableError,
    ItemNotFoundError,
)
from retrieval.indexing.data.records import ImageRecord, is_blank_label
from retrieval.indexing.search.binary import binarize, hamming_to_similarity
from retrieval.indexing.search.knn import Metric
from retrieval.indexing.search.results import PAD_ID, SearchResults
from retrieval.indexing.store.faiss_gpu import binary_searcher, float_searcher
from retrieval.indexing.store.faiss_kinds import binary_kind, build_binary_index, build_float_index, float_kind
from retrieval.indexing.store.filtered_search import exact_selected, selected_search
from retrieval.indexing.store.item_filter import ItemFilter
from retrieval.indexing.store.items_db import Item, ItemsDb
from retrieval.indexing.store.manifest import IndexManifest, load_index_manifest, save_index_manifest, utc_now
from retrieval.indexing.store.write_lock import exclusive_writer, remove_temp_files

_log = logging.getLogger(__name__)
_REBUILD = "rebuild the index with `retrieval index build`"


def write_embeddings(index_dir: Path, embeddings: np.ndarray) -> None:
    def writer(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.save(handle, np.ascontiguousarray(embeddings, dtype=np.float16))

    atomic_write_with(Path(index_dir) / EMBEDDINGS_NAME, writer)


def load_embeddings(index_dir: Path, dim: int) -> np.ndarray:
    path = Path(index_dir) / EMBEDDINGS_NAME
    try:
        embeddings = np.load(path, mmap_mode="r")
    except FileNotFoundError:
        raise IndexFormatError(f"{path} is missing; {_REBUILD}") from None
    except (ValueError, OSError, EOFError) as error:
        raise IndexFormatError(f"{path} is corrupt ({error}); {_REBUILD}") from None
    if embeddings.ndim != 2 or embeddings.shape[1] != dim or embeddings.dtype != np.float16:
        raise IndexFormatError(
            f"{path} holds {embeddings.dtype} {embeddings.shape}, not float16 (n, {dim}); {_REBUILD}"
        )
    return embeddings


def write_faiss_files(index_dir: Path, float_index: faiss.Index, binary_index: faiss.IndexBinary) -> None:
    atomic_write_with(Path(index_dir) / FLOAT_INDEX_NAME, lambda tmp: faiss.write_index(float_index, str(tmp)))
    atomic_write_with(Path(index_dir) / BINARY_INDEX_NAME, lambda tmp: faiss.write_index_binary(binary_index, str(tmp)))


def read_faiss_files(index_dir: Path, manifest: IndexManifest) -> tuple[Any, Any]:  # IndexIDMap2, IndexBinaryIDMap2
    """Load both indexes; a missing, truncated or foreign file names itself and says to rebuild."""
    pairs = (
        (FLOAT_INDEX_NAME, faiss.read_index, manifest.dim),
        (BINARY_INDEX_NAME, faiss.read_index_binary, manifest.bits),
    )
    loaded = []
    for name, reader, dim in pairs:
        path = Path(index_dir) / name
        if not path.is_file():
            raise IndexFormatError(f"{path} is missing; {_REBUILD}")
        try:
            index = reader(str(path))
        except RuntimeError:
            raise IndexFormatError(f"{path} is corrupt or truncated; {_REBUILD}") from None
        if index.d != dim or not hasattr(index, "id_map"):
            raise IndexFormatError(f"{path} is not an id-mapped index of dimension {dim}; {_REBUILD}")
        loaded.append(index)
    return loaded[0], loaded[1]


class IndexStore:
    """Search, look up, add and remove items of one index directory."""

    def __init__(
        self,
        index_dir: Path,
        manifest: IndexManifest,
        db: ItemsDb,
        embeddings: np.ndarray,
        float_index: Any,  # faiss.IndexIDMap2 (typed loosely: faiss's stubs miss the array overloads)
        binary_index: Any,  # faiss.IndexBinaryIDMap2
    ) -> None:
        self.index_dir = Path(index_dir)
        self.manifest = manifest
        self._db = db
        self._embeddings = embeddings
        self._float, self._binary = float_index, binary_index
        self._refresh()

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
            embeddings = load_embeddings(index_dir, manifest.dim)
            _check_rows(db, embeddings, index_dir)
            if db.generation != manifest.generation:
                return cls._repaired(index_dir, manifest, db, embeddings)
            float_index, binary_index = read_faiss_files(index_dir, manifest)
            if float_index.ntotal != db.count or binary_index.ntotal != db.count:
                return cls._repaired(index_dir, manifest, db, embeddings)
        except BaseException:
            db.close()
            raise
        return cls(index_dir, manifest, db, embeddings, float_index, binary_index)

    @classmethod
    def _repaired(cls, index_dir: Path, manifest: IndexManifest, db: ItemsDb, embeddings: np.ndarray) -> IndexStore:
        _log.warning("%s: an update was interrupted; rebuilding the faiss indexes from items.sqlite", index_dir)
        ids, rows = db.id_rows()
        vectors = np.asarray(embeddings[rows], dtype=np.float32)
        float_index = build_float_index(float_kind(manifest.float_kind), vectors, ids)
        codes = binarize(vectors, manifest.binarization_threshold)
        binary_index = build_binary_index(binary_kind(manifest.binary_kind), codes, ids, manifest.bits)
        store = cls(index_dir, manifest, db, embeddings, float_index, binary_index)
        try:
            with exclusive_writer(index_dir):
                store._commit_faiss(db.generation)
        except OSError as error:  # e.g. a read-only mount: serve the repaired copy from memory
            _log.warning("%s: could not save the repaired index (%s)", index_dir, error)
        return store

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> IndexStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- reading -----------------------------------------------------------------------
    @property
    def count(self) -> int:
        return len(self._ids)

    @property
    def dim(self) -> int:
        return self.manifest.dim

    def ids(self) -> np.ndarray:
        """All item ids, ascending."""
        return self._ids.copy()

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
        return np.asarray(self._embeddings[self._rows_of(np.asarray(ids, dtype=np.int64))], dtype=np.float32)

    def _rows_of(self, ids: np.ndarray) -> np.ndarray:
        where = np.searchsorted(self._ids, ids)
        known = (where < len(self._ids)) & (self._ids[np.minimum(where, len(self._ids) - 1)] == ids)
        if not known.all():
            raise ItemNotFoundError(f"there is no item {int(ids[~known][0])} in the index")
        return self._row_of_id[where]

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
        bits`` for plain binary results. ``rerank=N`` re-orders a binary top-N shortlist by the
        exact inner product with the stored (float16) embeddings. ``where`` keeps only the items
        that pass the filter (``filtered_search``): min(k, matches) results per row.
        """
        queries = self._check_queries(vectors, k)
        if where is not None:
            return self._search_where(queries, k, kind, rerank, self._db.matching_ids(where))
        k = min(k, self.count)
        if kind == "float":
            scores, ids = self._search_float(queries, k)
            return _padded(ids, scores)
        if kind != "binary":
            raise DataError(f"unknown search kind {kind!r}; use 'float' or 'binary'")
        codes = binarize(queries, self.manifest.binarization_threshold)
        if rerank:
            _, shortlist = self._search_binary(codes, min(max(rerank, k), self.count))
            return self._rerank(queries, shortlist, k)
        distances, ids = self._search_binary(codes, k)
        return _padded(ids, hamming_to_similarity(distances, self.manifest.bits))

    def _search_where(
        self, queries: np.ndarray, k: int, kind: str, rerank: int | None, allowed: np.ndarray
    ) -> SearchResults:
        k = min(k, len(allowed))
        if k == 0:
            return SearchResults(np.full((len(queries), 0), PAD_ID, np.int64), np.zeros((len(queries), 0), np.float32))
        if kind == "float":
            exact = partial(self._exact_where, queries, allowed, k, "ip")
            approximate = not float_kind(self.manifest.float_kind).exact
            return selected_search(
                self._float, queries, k, allowed, approximate=approximate, to_scores=lambda d: d, exact=exact
            )
        if kind != "binary":
            raise DataError(f"unknown search kind {kind!r}; use 'float' or 'binary'")
        codes = binarize(queries, self.manifest.binarization_threshold)
        wanted = min(max(rerank, k), len(allowed)) if rerank else k
        exact = partial(self._exact_where, codes, allowed, wanted, "hamming")
        approximate = not binary_kind(self.manifest.binary_kind).exact
        found = selected_search(
            self._binary, codes, wanted, allowed, approximate=approximate, to_scores=self._hamming_scores, exact=exact
        )
        return self._rerank(queries, found.ids, k) if rerank else found

    def _exact_where(
        self, queries: np.ndarray, allowed: np.ndarray, k: int, metric: Metric, rows: np.ndarray
    ) -> SearchResults:
        """Exact search of ``queries[rows]`` over the allowed items' stored embeddings (or their codes)."""
        threshold = self.manifest.binarization_threshold
        vectors = self.embeddings_of if metric == "ip" else lambda ids: binarize(self.embeddings_of(ids), threshold)
        return exact_selected(queries[rows], allowed, k, vectors, metric, dim=self.dim)

    def _hamming_scores(self, distances: np.ndarray) -> np.ndarray:
        return hamming_to_similarity(distances, self.manifest.bits)

    def _check_queries(self, vectors: np.ndarray, k: int) -> np.ndarray:
        queries = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise DataError(
                f"query vectors have shape {queries.shape} but the index holds {self.dim}-d embeddings; "
                "embed queries with the model the index was built with"
            )
        if k < 1:
            raise DataError(f"k must be at least 1, got {k}")
        if self.count == 0:
            raise DataError(f"the index {self.index_dir} is empty; add images with `retrieval index add`")
        return np.ascontiguousarray(queries)

    def _rerank(self, queries: np.ndarray, shortlist: np.ndarray, k: int) -> SearchResults:
        """Order each binary shortlist by exact inner product with the stored float embeddings."""
        ids = np.full((len(queries), k), -1, dtype=np.int64)
        scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        for q, candidates in enumerate(shortlist):
            candidates = candidates[candidates >= 0]
            similarity = self.embeddings_of(candidates) @ queries[q]
            order = np.argsort(-similarity, kind="stable")[:k]
            ids[q, : len(order)], scores[q, : len(order)] = candidates[order], similarity[order]
        return SearchResults(ids=ids, scores=scores)

    # ----- updating ----------------------------------------------------------------------
    def add(
        self, records: Sequence[ImageRecord], embeddings: np.ndarray, *, idempotency_key: str | None = None
    ) -> list[int]:
        """Add items with their (n, d) embeddings; returns the new item ids.

        With ``idempotency_key``, the ids and the count after this add are recorded in the same
        transaction as the items, so a retried request can be answered from ``recall`` instead of
        adding the items twice."""
        with self._writing():
            return self._add(records, embeddings, idempotency_key)

    def recall(self, idempotency_key: str) -> dict[str, Any] | None:
        """``{"ids": [...], "count": n}`` of the add first made under this key, or None."""
        return self._db.recall(idempotency_key)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the cross-process writer lock and check that the directory on disk is still the
        generation this store extends; a failed write (read-only mount, full disk) is an
        IndexNotWritableError."""
        try:
            with exclusive_writer(self.index_dir):
                self._check_unchanged_on_disk()
                remove_temp_files(self.index_dir)  # only writers write there, and we are the only one
                yield
        except OSError as error:
            raise IndexNotWritableError(
                f"cannot write to the index directory {self.index_dir} ({error.strerror or error}); "
                "mount it writable to add or remove items"
            ) from None

    def _check_unchanged_on_disk(self) -> None:
        on_disk = load_index_manifest(self.index_dir)
        mine = (self.manifest.generation, self.manifest.build_id, self.manifest.created_at)
        if (on_disk.generation, on_disk.build_id, on_disk.created_at) != mine:
            raise IndexChangedError(
                f"{self.index_dir} was changed by another writer (generation {on_disk.generation} built "
                f"{on_disk.created_at} on disk, {self.manifest.generation} built {self.manifest.created_at} "
                "here); reopen it (the service: POST /admin/reload) and retry"
            )

    def _add(self, records: Sequence[ImageRecord], embeddings: np.ndarray, key: str | None) -> list[int]:
        vectors = np.asarray(embeddings, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim or len(vectors) != len(records):
            raise DataError(
                f"add() needs one {self.dim}-d embedding per record, got {vectors.shape} for {len(records)} records"
            )
        validate_labels(records)
        if not records:
            return []
        start = len(self._embeddings)
        write_embeddings(self.index_dir, np.concatenate([self._embeddings, vectors.astype(np.float16)]))
        generation = self.manifest.generation + 1
        with self._db.transaction():
            ids = self._db.insert(records, range(start, start + len(records)))
            self._db.set_generation(generation)
            if key is not None:
                self._db.remember(key, {"ids": ids, "count": self._db.count})
        self._embeddings = load_embeddings(self.index_dir, self.dim)
        id_array = np.asarray(ids, dtype=np.int64)
        self._float.add_with_ids(np.ascontiguousarray(vectors), id_array)
        self._binary.add_with_ids(binarize(vectors, self.manifest.binarization_threshold), id_array)
        self._commit_faiss(generation)
        return ids

    def remove(self, ids: Sequence[int]) -> int:
        """Remove items by id (unknown ids are ignored); returns how many were removed."""
        with self._writing():
            return self._remove(ids)

    def _remove(self, ids: Sequence[int]) -> int:
        wanted = np.unique(np.asarray(list(ids), dtype=np.int64))
        present = wanted[np.isin(wanted, self._ids)]
        if len(present) == 0:
            return 0
        generation = self.manifest.generation + 1
        with self._db.transaction():
            removed = self._db.delete(present.tolist())
            self._db.set_generation(generation)
        self._refresh()
        self._remove_from_faiss(present)
        self._commit_faiss(generation)
        return removed

    def _remove_from_faiss(self, removed: np.ndarray) -> None:
        """Flat kinds remove in place; others are reset and refilled from the stored embeddings."""
        vectors = self.embeddings_of(self._ids)
        for index, kind, data in (
            (self._float, float_kind(self.manifest.float_kind), vectors),
            (self._binary, binary_kind(self.manifest.binary_kind), None),
        ):
            if kind.removes_in_place:
                index.remove_ids(removed)  # faiss accepts an id array here (its stubs say IDSelector)
                continue
            index.reset()
            if len(self._ids):
                data = data if data is not None else binarize(vectors, self.manifest.binarization_threshold)
                index.add_with_ids(np.ascontiguousarray(data), self._ids)

    def _commit_faiss(self, generation: int) -> None:
        write_faiss_files(self.index_dir, self._float, self._binary)
        labels = len(self._db.labels())
        self.manifest = self.manifest.model_copy(
            update={"generation": generation, "count": self._db.count, "num_labels": labels, "updated_at": utc_now()}
        )
        save_index_manifest(self.index_dir, self.manifest)
        self._refresh()

    def _refresh(self) -> None:
        self._ids, rows = self._db.id_rows()
        self._row_of_id = rows
        self._search_float = float_searcher(self._float, self.manifest.float_kind)
        self._search_binary = binary_searcher(self._binary, self.manifest.binary_kind)


def _padded(ids: np.ndarray, scores: np.ndarray) -> SearchResults:
    """faiss marks missing results with id -1 (and a huge score): make them ``PAD_ID`` / -inf."""
    ids = np.asarray(ids, dtype=np.int64)
    scores = np.where(ids == PAD_ID, -np.inf, scores).astype(np.float32)
    return SearchResults(ids=ids, scores=scores)


def validate_labels(records: Sequence[ImageRecord]) -> None:
    """Every item needs a class label; an empty one would silently form its own class."""
    for record in records:
        if is_blank_label(record.label):
            raise DataError(f"image {record.path} has an empty label; give every image a class name")


def _check_rows(db: ItemsDb, embeddings: np.ndarray, index_dir: Path) -> None:
    _, rows = db.id_rows()
    if len(rows) and rows.max() >= len(embeddings):
        raise IndexFormatError(f"{index_dir / EMBEDDINGS_NAME} has fewer rows than items.sqlite references; {_REBUILD}")
