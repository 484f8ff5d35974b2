"""An index whose items live in a Milvus collection: the ``Store`` interface over pymilvus.

The index directory keeps ``manifest.json`` (``backend: milvus``, the URI and the collection) and
``model/``; Milvus holds the items (schema in ``milvus_client``). Search: float = exact inner
product (FLAT, IP) on the float vectors; binary = exact Hamming (BIN_FLAT) on the 2048-bit codes,
scored ``1 - 2 * hamming / bits`` like the files backend; ``rerank=N`` = a Hamming top-N
shortlist re-ordered by the inner product (the cosine of L2-normalised embeddings) with the
shortlist's float vectors, fetched from Milvus. ``where`` filters run inside Milvus
(``milvus_filter``). Ties in score are ordered by ascending id.

Writes: ids come from a counter in the meta collection (never reused); an add inserts its rows,
then records its idempotency key. A replace (``add(..., replace=True)``) upserts the new row under the
id of the item that held its key (Milvus's upsert replaces a row by primary key, atomically per row), so
the id survives. Replaces of older versions recorded their new and old ids in the meta collection;
opening the store still finishes or undoes such a record that a crash left.
Milvus has no id sequence either, so one writer at a time is assumed (the CLI or one service replica), and a crash mid-add can leave ids
unused or an add without its idempotency record (a retry then adds again). Not thread-safe: the
service calls it from one store thread, like ``IndexStore``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.indexing.common.errors import ConfigError, DataError, IndexFormatError, ItemNotFoundError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.search.results import SearchResults, rank_order
from retrieval.indexing.store.milvus.milvus_client import (
    MAX_TOPK,
    TIMEOUT_S,
    connect,
    has_keys,
    meta_collection,
    milvus_call,
)
from retrieval.indexing.store.milvus.milvus_filter import (
    MARKED_OPERATORS,
    filter_expression,
    in_expression,
    presence_expression,
    text_key,
    unmarked_expression,
    value_key,
)
from retrieval.indexing.store.milvus.milvus_rows import (
    end_replace,
    item_rows,
    next_id,
    pending_replace,
    read_items,
    recall,
    remember,
    save_next_id,
)
from retrieval.indexing.store.shared.index_directory.compaction import CompactionPolicy, CompactionResult
from retrieval.indexing.store.shared.index_directory.index_manifest import (
    IndexManifest,
    check_model,
    load_index_manifest,
)
from retrieval.indexing.store.shared.items.filter_conditions import is_scalar
from retrieval.indexing.store.shared.items.item_filter import ItemFilter, Scalar
from retrieval.indexing.store.shared.items.items_db import Item
from retrieval.indexing.store.shared.store_base import StoreBase
from retrieval.indexing.store.shared.store_checks import check_keys_free, checked_additions
from retrieval.indexing.store.shared.store_protocol import AddOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

_ITEM_FIELDS = ["id", "path", "label", "split", "is_query", "is_gallery", "metadata"]
_CHUNK = 1000  # ids per query: keeps the expression and the reply small
_FIELDS = {SearchKind.FLOAT: ("vector", "IP"), SearchKind.BINARY: ("code", "HAMMING")}  # (vector field, metric)


def _values_of(rows: list[dict[str, Any]], key: str) -> list[Scalar]:
    """The scalar values of ``key`` in the rows' metadata (rows without it left out)."""
    return [row["metadata"][key] for row in rows if key in (row["metadata"] or {}) and is_scalar(row["metadata"][key])]


class MilvusStore(StoreBase[str]):
    """Search, look up, add and remove items of an index directory whose items live in Milvus."""

    def __init__(self, index_dir: Path, manifest: IndexManifest, client: Any) -> None:
        self.index_dir = Path(index_dir)
        self.manifest = manifest
        self.uri = str(manifest.milvus_uri)
        self.collection = str(manifest.milvus_collection)
        self._client = client
        self._keyed = has_keys(client, self.uri, self.collection)  # False: built before item keys
        self._fields = [*_ITEM_FIELDS, "key"] if self._keyed else _ITEM_FIELDS
        self._count = self._live_count()
        self._marked = self._count == 0 or not self._call(
            "query", "query", self.collection, filter=unmarked_expression(), output_fields=["id"], limit=1
        )  # every item carries the number and presence marks of milvus_filter (not so before they existed)
        self._finish_replace()

    def _finish_replace(self) -> None:
        """Complete or undo a replace a crash interrupted (see the module docstring)."""
        meta = meta_collection(self.collection)
        pending = pending_replace(self._client, meta, self.uri)
        if pending is None:
            return
        new, old = pending
        inserted = [row["id"] for row in self._rows_by_id(new, [])]
        self.remove(old if len(inserted) == len(new) else inserted)
        end_replace(self._client, meta, self.uri)

    @classmethod
    def open(cls, index_dir: Path, *, expected_model_sha256: str | None = None, force: bool = False) -> MilvusStore:
        """Open the collection a ``backend: milvus`` manifest names (checking the model like ``IndexStore``)."""
        manifest = load_index_manifest(index_dir)
        if manifest.backend != "milvus" or not manifest.milvus_uri or not manifest.milvus_collection:
            raise IndexFormatError(f"{index_dir} is not a milvus index (its manifest names no Milvus collection)")
        check_model(manifest, expected_model_sha256, force=force)
        client = connect(manifest.milvus_uri)
        name = manifest.milvus_collection
        for wanted in (name, meta_collection(name)):
            if not milvus_call(manifest.milvus_uri, "has_collection", partial(client.has_collection, wanted)):
                client.close()
                raise IndexFormatError(
                    f"Milvus at {manifest.milvus_uri} has no collection {wanted}; rebuild the index with "
                    f"`retrieval index build --backend milvus --out {index_dir}`"
                )
            milvus_call(manifest.milvus_uri, "load_collection", partial(client.load_collection, wanted))
        return cls(index_dir, manifest, client)

    def close(self) -> None:
        self._client.close()

    def _call(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        call = getattr(self._client, method)
        return milvus_call(self.uri, what, partial(call, *args, timeout=TIMEOUT_S, **kwargs))

    # ----- reading -----------------------------------------------------------------------
    @property
    def count(self) -> int:
        return self._count

    def _live_count(self) -> int:
        rows = self._call("count", "query", self.collection, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"])

    def ids(self) -> np.ndarray:
        """All item ids, ascending."""
        found = [row["id"] for row in self._scan(["id"])]
        return np.sort(np.asarray(found, dtype=np.int64))

    def _scan(self, fields: list[str], where: str = "") -> list[dict[str, Any]]:
        iterator = self._call("query_iterator", "query_iterator", self.collection, filter=where, output_fields=fields)
        rows: list[dict[str, Any]] = []
        try:
            while batch := milvus_call(self.uri, "query_iterator", iterator.next):
                rows += batch
        finally:
            iterator.close()
        return rows

    def items(self, ids: Sequence[int]) -> list[Item | None]:
        """Items in the order of ``ids``; ``None`` for ids that do not exist (e.g. faiss's -1)."""
        wanted = [int(i) for i in ids]
        found = read_items(self._rows_by_id([i for i in set(wanted) if i >= 0], self._fields))
        return [found.get(i) for i in wanted]

    def _ids_of_stored_keys(self, keys: Sequence[str]) -> dict[str, int]:
        """key -> id of the given stored keys that an item carries (the larger id where a crash left two)."""
        if not self._keyed or not keys:
            return {}
        wanted = set(keys)
        hashes = sorted({text_key(key) for key in wanted})
        found: dict[str, int] = {}
        for start in range(0, len(hashes), _CHUNK):
            expression = in_expression("key_hash", hashes[start : start + _CHUNK])
            for row in self._call("query", "query", self.collection, filter=expression, output_fields=["id", "key"]):
                if row["key"] in wanted:
                    found[row["key"]] = max(int(row["id"]), found.get(row["key"], 0))
        return found

    def paths_in_use(self, paths: Sequence[str]) -> set[str]:
        """Which of ``paths`` some item of the index still points to."""
        wanted = set(paths)
        keys = sorted({text_key(path) for path in wanted})
        rows = self._call(
            "query", "query", self.collection, filter=in_expression("path_key", keys), output_fields=["path"]
        )
        return {row["path"] for row in rows if row["path"] in wanted}

    def all_items(self) -> list[Item]:
        """Every item, ascending by id."""
        found = read_items(self._scan(self._fields))
        return [found[i] for i in sorted(found)]

    def scroll(self, where: ItemFilter | None, after: int, limit: int) -> list[Item]:
        """Up to ``limit`` items (ascending ids) above id ``after`` that pass ``where``."""
        scope = " and ".join(part for part in (f"id > {int(after)}", self._scope(where)[0]) if part)
        rows = self._scan(["id"], scope)
        page = sorted(int(row["id"]) for row in rows)[:limit]
        found = read_items(self._rows_by_id(page, self._fields))
        return [found[i] for i in page if i in found]

    def keys_in_use(self, keys: Sequence[str]) -> set[str]:
        """Which of the metadata ``keys`` some item has (by their presence marks, ``milvus_filter``; all of
        them on a collection written before the marks, which cannot tell)."""
        if not self._marked:
            return set(keys)
        used = set()
        for key in keys:
            where = presence_expression(key)
            if self._call("query", "query", self.collection, filter=where, output_fields=["id"], limit=1):
                used.add(key)
        return used

    def metadata_keys(self) -> list[str]:
        """Every metadata key some item has, sorted (a scan of the collection)."""
        return sorted({key for row in self._scan(["metadata"]) for key in (row["metadata"] or {})})

    def value_counts(self, key: str | None) -> list[tuple[Scalar, int]]:
        """(value, items) of the label or a metadata key, like ``ItemsDb.value_counts`` (a scan)."""
        rows = self._scan(["label"] if key is None else ["metadata"])
        values = [row["label"] for row in rows] if key is None else _values_of(rows, key)
        counts: dict[str, tuple[Scalar, int]] = {}
        for value in values:
            tag = value_key(value)
            first, count = counts.get(tag, (value, 0))
            counts[tag] = (first, count + 1)
        return sorted(counts.values(), key=lambda pair: (-pair[1], json.dumps(pair[0])))

    def embeddings_of(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Stored float32 embeddings (n, d) of existing item ids, in the order given."""
        wanted = np.asarray(ids, dtype=np.int64).reshape(-1)
        rows = {row["id"]: row["vector"] for row in self._rows_by_id(np.unique(wanted).tolist(), ["vector"])}
        missing = [int(i) for i in wanted if int(i) not in rows]
        if missing:
            raise ItemNotFoundError(f"there is no item {missing[0]} in the index")
        return np.asarray([rows[int(i)] for i in wanted], dtype=np.float32).reshape(len(wanted), self.dim)

    def _rows_by_id(self, ids: list[int], fields: list[str]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            expression = in_expression("id", chunk)
            rows += self._call("query", "query", self.collection, filter=expression, output_fields=["id", *fields])
        return rows

    # ----- searching (``StoreBase.search`` calls these) ----------------------------------------
    def is_exact(self, kind: SearchKind) -> bool:
        """A Milvus collection is searched exactly (FLAT, BIN_FLAT) in both kinds."""
        return True

    def _scope(self, where: ItemFilter | None) -> tuple[str, int]:
        """The filter as a Milvus expression (Milvus pads past the matches); at most ``MAX_TOPK`` results."""
        if where is not None and not self._marked and any(c.op in MARKED_OPERATORS for c in where.conditions):
            raise DataError(
                f"{self.index_dir} holds items written before range and $exists filters existed; rebuild it "
                f"(retrieval index build --backend milvus --out {self.index_dir}: a new collection) to filter with them"
            )
        return (filter_expression(where) if where is not None else ""), min(self.count, MAX_TOPK)

    def _search_kind(self, kind: SearchKind, data: np.ndarray, k: int, scope: str) -> SearchResults:
        """Top-``k`` by the collection's ``kind`` field, ties by ascending id; binary distances scored
        ``1 - 2 * hamming / bits`` like the files backend."""
        field, metric = _FIELDS[kind]
        vectors = [row.tolist() for row in data] if kind is SearchKind.FLOAT else [code.tobytes() for code in data]
        replies = self._call(
            "search",
            "search",
            self.collection,
            data=vectors,
            anns_field=field,
            limit=k,
            filter=scope,
            search_params={"metric_type": metric},
            output_fields=[],
        )
        found = SearchResults.empty(len(vectors), k)
        for row, hits in enumerate(replies):
            ids = np.asarray([hit["id"] for hit in hits], dtype=np.int64)
            scores = kind.scores(np.asarray([hit["distance"] for hit in hits], dtype=np.float32), self.manifest.bits)
            order = rank_order(ids, scores)
            found.ids[row, : len(order)], found.scores[row, : len(order)] = ids[order], scores[order]
        return found

    # ----- updating ----------------------------------------------------------------------
    def add(self, records: Sequence[ImageRecord], embeddings: np.ndarray, **options: Unpack[AddOptions]) -> list[int]:
        """Add items with their (n, d) embeddings; returns the new item ids (see the module docstring). A
        record key in use is a KeyConflictError unless ``replace``: the item holding it is then removed."""
        replace, idempotency_key = options.get("replace", False), options.get("idempotency_key")
        vectors = checked_additions(records, embeddings, self.dim)
        if not records:
            return []
        keys = [record.key for record in records if record.key is not None]
        if keys and not self._keyed:
            raise DataError(
                f"{self.index_dir} was built before item keys existed; rebuild it "
                f"(retrieval index build --backend milvus --out {self.index_dir}: a new collection) to add items with keys"
            )
        taken = self.ids_of_keys(keys)
        if not replace:
            check_keys_free(keys, taken)
        meta = meta_collection(self.collection)
        kept = [taken.get(record.key) if record.key is not None else None for record in records]
        first, fresh = next_id(self._client, meta, self.uri), kept.count(None)
        new_ids = iter(range(first, first + fresh))
        ids = [item_id if item_id is not None else next(new_ids) for item_id in kept]
        if fresh:
            save_next_id(self._client, meta, self.uri, first + fresh)
        rows = item_rows(records, vectors, ids, self.manifest.binarization_threshold, keyed=self._keyed)
        if inserted := [row for row, item_id in zip(rows, kept, strict=True) if item_id is None]:
            self._call("insert", "insert", self.collection, data=inserted)
        if upserted := [row for row, item_id in zip(rows, kept, strict=True) if item_id is not None]:
            self._call("upsert", "upsert", self.collection, data=upserted)  # a replaced item keeps its id
        self._count += fresh
        if idempotency_key is not None:
            digest = options.get("request_digest")
            result = {"ids": ids, "count": self._count, **({"request": digest} if digest else {})}
            remember(self._client, meta, self.uri, idempotency_key, result)
        return ids

    def recall(self, idempotency_key: str) -> dict[str, Any] | None:
        """``{"ids": [...], "count": n}`` of the add first made under this key, or None."""
        return recall(self._client, meta_collection(self.collection), self.uri, idempotency_key)

    def remove(self, ids: Sequence[int]) -> int:
        """Remove items by id (unknown ids are ignored); returns how many were removed."""
        wanted = sorted({int(i) for i in ids})
        present = [row["id"] for row in self._rows_by_id(wanted, [])]
        if not present:
            return 0
        for start in range(0, len(present), _CHUNK):
            self._call("delete", "delete", self.collection, ids=present[start : start + _CHUNK])
        self._count -= len(present)
        return len(present)

    def compact(self, *, policy: CompactionPolicy | None = None) -> CompactionResult:
        """Nothing to do: Milvus merges its own segments (a ConfigError, as ``retrieval index compact`` says)."""
        raise ConfigError(
            f"{self.index_dir} is a Milvus index: Milvus merges its own segments, there is nothing to compact"
        )
