"""Rows of the Milvus collections: items <-> ``Item``, the id counter, the idempotency records and the record
of a replace in progress."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.store.milvus.milvus_client import LABEL_CHARS, PATH_CHARS, SPLIT_CHARS, TIMEOUT_S, milvus_call
from retrieval.indexing.store.milvus.milvus_filter import filter_keys, text_key
from retrieval.indexing.store.shared.items.items_db import Item

_NEXT_ID = "next_id"
_REPLACE = "replace_in_progress"
_DUMMY = [0.0, 0.0]  # the meta collection's required vector


def item_rows(
    records: Sequence[ImageRecord], vectors: np.ndarray, ids: Sequence[int], threshold: float, *, keyed: bool = True
) -> list[dict]:
    """Insertable rows: the record's fields, its metadata (JSON as ``items_db`` stores it), its key and
    the key's hash ("" for none; not for a collection built before keys, ``keyed`` False), its filter
    keys, its binary code (bytes) and its float vector."""
    codes = binarize(vectors, threshold)
    rows = []
    for record, vector, code, item_id in zip(records, vectors, codes, ids, strict=True):
        path, label, split = str(record.path), record.label, record.split or ""
        _check_fits(path, label, split)
        metadata = json.loads(json.dumps(record.metadata, default=str, sort_keys=True))
        keys = {"key": record.key or "", "key_hash": text_key(record.key) if record.key else ""} if keyed else {}
        rows.append(
            {
                **keys,
                "id": int(item_id),
                "path": path,
                "path_key": text_key(path),
                "label": label,
                "split": split,
                "is_query": bool(record.is_query),
                "is_gallery": bool(record.is_gallery),
                "metadata": metadata,
                "filter_keys": filter_keys(label, metadata),
                "code": code.tobytes(),
                "vector": vector.tolist(),
            }
        )
    return rows


def _check_fits(path: str, label: str, split: str) -> None:
    """Milvus VARCHARs hold UTF-8 of a declared length: say which value does not fit, before inserting."""
    for what, text, limit in (("path", path, PATH_CHARS), ("label", label, LABEL_CHARS), ("split", split, SPLIT_CHARS)):
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise DataError(f"the {what} {text!r} is not valid UTF-8; rename it and add it again") from None
        if size > limit:
            raise DataError(f"the {what} {text[:60]!r}... is {size} bytes long; the milvus backend stores {limit}")


def read_items(rows: Sequence[dict[str, Any]]) -> dict[int, Item]:
    """Query rows (with ``_ITEM_FIELDS``) as ``Item``s by id; ``row`` is -1 (Milvus stores the vectors)."""
    return {
        int(row["id"]): Item(
            id=int(row["id"]),
            path=row["path"],
            label=row["label"],
            split=row["split"] or None,
            is_query=bool(row["is_query"]),
            is_gallery=bool(row["is_gallery"]),
            metadata=dict(row["metadata"] or {}),
            key=row.get("key") or None,
        )
        for row in rows
    }


def next_id(client: Any, meta: str, uri: str) -> int:
    """The next unused item id (ids start at 1, like SQLite's)."""
    query = partial(client.query, meta, ids=[_NEXT_ID], output_fields=["value"], timeout=TIMEOUT_S)
    rows = milvus_call(uri, "read the id counter", query)
    return int(rows[0]["value"]["next_id"]) if rows else 1


def save_next_id(client: Any, meta: str, uri: str, value: int) -> None:
    _upsert(client, meta, uri, _NEXT_ID, {"next_id": int(value)})


def remember(client: Any, meta: str, uri: str, key: str, result: dict[str, Any]) -> None:
    """Record the result of the add made under an idempotency key (hashed: keys are any text)."""
    _upsert(client, meta, uri, _idempotency_row(key), result)


def recall(client: Any, meta: str, uri: str, key: str) -> dict[str, Any] | None:
    """The result ``remember`` recorded under ``key``, or None."""
    query = partial(client.query, meta, ids=[_idempotency_row(key)], output_fields=["value"], timeout=TIMEOUT_S)
    rows = milvus_call(uri, "recall an idempotency key", query)
    return dict(rows[0]["value"]) if rows else None


def pending_replace(client: Any, meta: str, uri: str) -> tuple[list[int], list[int]] | None:
    """(new ids, old ids) of a replace that an older version recorded (it inserted a new id, then deleted the
    old one) and nothing cleared, or None: opening the store finishes or undoes it."""
    query = partial(client.query, meta, ids=[_REPLACE], output_fields=["value"], timeout=TIMEOUT_S)
    rows = milvus_call(uri, "read the replace record", query)
    value = dict(rows[0]["value"]) if rows else {}
    return (list(value["new"]), list(value["old"])) if value.get("new") else None


def end_replace(client: Any, meta: str, uri: str) -> None:
    _upsert(client, meta, uri, _REPLACE, {})


def _idempotency_row(key: str) -> str:
    return f"idempotency:{text_key(key)}"


def _upsert(client: Any, meta: str, uri: str, key: str, value: dict[str, Any]) -> None:
    row = {"key": key, "value": value, "dummy": _DUMMY}
    milvus_call(uri, f"write {key}", partial(client.upsert, meta, data=[row], timeout=TIMEOUT_S))
