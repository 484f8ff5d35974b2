"""``items.sqlite``: the item table of an index (ids, paths, labels, flags, metadata, embedding rows).

Item ids come from ``INTEGER PRIMARY KEY AUTOINCREMENT``, so an id is never reused even
after the newest item is removed; faiss stores the same ids. The ``meta`` table holds the
committed ``generation``: an update commits the new rows and generation in ONE SQLite
transaction, which makes this file the source of truth after a crash. Image paths inside the index
directory are stored relative to it (``item_paths``). ``key`` is the user's own id of an item (UNIQUE;
NULL for an item without one): a table written before keys existed has no such column, reads as keyless,
and gets the column (and its unique index) in the transaction of the first write that gives a key.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from retrieval.indexing.common.errors import DataError, IndexFormatError
from retrieval.indexing.common.unicode_text import readable_json
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.store.shared.items.filter_sql import filter_sql
from retrieval.indexing.store.shared.items.item_filter import ItemFilter, Scalar
from retrieval.indexing.store.shared.items.item_paths import absolute_path, stored_path

_SCHEMA = """
CREATE TABLE items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT NOT NULL,
    label TEXT NOT NULL,
    split TEXT,
    is_query INTEGER NOT NULL,
    is_gallery INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    row INTEGER NOT NULL UNIQUE,
    key TEXT
);
CREATE INDEX items_label ON items (label);
CREATE UNIQUE INDEX items_key ON items (key);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta (key, value) VALUES ('generation', '0');
"""
_COLUMNS = "id, path, label, split, is_query, is_gallery, metadata, row"
_ADD_KEY_COLUMN = ("ALTER TABLE items ADD COLUMN key TEXT", "CREATE UNIQUE INDEX items_key ON items (key)")
_CHUNK = 500  # SQLite's default limit on bound parameters is 999


@dataclass(frozen=True)
class Item:
    """One indexed image; ``row`` is its row in ``embeddings.f16.npy``."""

    id: int
    path: str
    label: str
    split: str | None
    is_query: bool
    is_gallery: bool
    metadata: dict[str, Any] = field(default_factory=dict)
    row: int = -1
    key: str | None = None


def _item(row: tuple, root: Path) -> Item:
    """An item as stored, its path absolute; text written before lone surrogates were refused is read
    with U+FFFD in their place (``json.dumps`` escaped them as ``\\ud800``), so such an item is still served."""
    id_, stored, label, split, is_query, is_gallery, metadata, emb_row, key = row
    path = absolute_path(stored, root)
    meta = readable_json(json.loads(metadata))
    return Item(id_, path, label, split, bool(is_query), bool(is_gallery), meta, emb_row, key)


def _check_text(record: ImageRecord) -> None:
    """SQLite stores UTF-8: a path or label decoded from undecodable file-name bytes (Python's
    surrogate escapes) cannot be stored, so say which one instead of failing deep in sqlite3."""
    for what, text in (("label", record.label), ("path", str(record.path))):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(text).decode("utf-8", "backslashreplace")
            raise DataError(
                f'the {what} "{shown}" is not valid UTF-8 (a file or folder name in another encoding); '
                "rename it, e.g. with convmv, and build again"
            ) from None


class ItemsDb:
    """A thin typed wrapper over the SQLite file; not thread-safe (the store is used under a lock)."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._db = connection
        self.path = path
        columns = {row[1] for row in connection.execute("PRAGMA table_info(items)")}
        self._keyed = "key" in columns  # False: a table written before keys (read as keyless)

    @property
    def _columns(self) -> str:
        return f"{_COLUMNS}, {'key' if self._keyed else 'NULL'}"

    @classmethod
    def create(cls, path: Path) -> ItemsDb:
        db = sqlite3.connect(path, isolation_level=None)
        db.executescript(_SCHEMA)
        return cls(db, Path(path))

    @classmethod
    def open(cls, path: Path) -> ItemsDb:
        if not Path(path).is_file():
            raise IndexFormatError(f"{path} is missing; rebuild the index with `retrieval index build`")
        db = sqlite3.connect(f"file:{path}?mode=rw", uri=True, isolation_level=None)
        try:
            db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
            db.execute(f"SELECT {_COLUMNS} FROM items LIMIT 1").fetchall()
        except sqlite3.DatabaseError as error:
            db.close()
            raise IndexFormatError(
                f"{path} is corrupt ({error}); rebuild the index with `retrieval index build`"
            ) from None
        return cls(db, Path(path))

    @property
    def root(self) -> Path:
        """The index directory: item paths inside it are stored relative to it."""
        return Path(os.path.abspath(self.path.parent))

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All statements inside commit together or not at all."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    @property
    def generation(self) -> int:
        return int(self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])

    def set_generation(self, generation: int) -> None:
        self._db.execute("UPDATE meta SET value = ? WHERE key = 'generation'", (str(generation),))

    def meta(self, key: str, default: str) -> str:
        """A value of the ``meta`` table (``default`` where it was never set)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def set_rows(self, ids: Sequence[int], rows: Sequence[int]) -> None:
        """Point the given items at new embedding rows (a compaction's renumbering). The rows are
        negated first, so a new row may be an old row of another item of the batch (``row`` is UNIQUE)."""
        pairs = [(int(row), int(item_id)) for item_id, row in zip(ids, rows, strict=True)]
        self._db.executemany("UPDATE items SET row = -1 - row WHERE id = ?", [(i,) for _, i in pairs])
        self._db.executemany("UPDATE items SET row = ? WHERE id = ?", pairs)

    def has_label(self, label: str) -> bool:
        return self._db.execute("SELECT 1 FROM items WHERE label = ? LIMIT 1", (label,)).fetchone() is not None

    def labels_of(self, ids: Sequence[int]) -> list[str]:
        """The distinct labels of the given items."""
        return sorted({item.label for item in self.items(ids) if item is not None})

    def _add_key_column(self) -> None:
        """Give a table written before keys its ``key`` column (inside the caller's transaction)."""
        for statement in _ADD_KEY_COLUMN:
            self._db.execute(statement)
        self._keyed = True

    def ids_of_keys(self, keys: Sequence[str]) -> dict[str, int]:
        """key -> id of the given keys that an item carries (keys no item carries are left out)."""
        if not self._keyed:
            return {}
        found: dict[str, int] = {}
        wanted = list(dict.fromkeys(keys))
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            found.update(self._db.execute(f"SELECT key, id FROM items WHERE key IN ({marks})", chunk).fetchall())
        return found

    def insert(
        self, records: Sequence[ImageRecord], rows: Sequence[int], ids: Sequence[int | None] | None = None
    ) -> list[int]:
        """Insert records whose embeddings sit at ``rows``; returns their ids in order: new ones, or
        ``ids`` when given (a copy of another index's items keeps their ids; an id or key in use is a
        DataError: the stores check keys first, ``store_checks.check_keys_free``)."""
        given = list(ids) if ids is not None else [None] * len(records)
        if not self._keyed and any(record.key is not None for record in records):
            self._add_key_column()
        columns, marks = "id, path, label, split, is_query, is_gallery, metadata, row", "?,?,?,?,?,?,?,?"
        if self._keyed:
            columns, marks = f"{columns}, key", f"{marks},?"
        statement = f"INSERT INTO items ({columns}) VALUES ({marks})"
        rows_values = self._values(records, rows, given)
        if all(item_id is None for item_id in given) and (bulk := self._insert_new(statement, rows_values)):
            return bulk
        inserted = []
        for record, values, item_id in zip(records, rows_values, given, strict=True):
            try:
                cursor = self._db.execute(statement, values)
            except sqlite3.IntegrityError:
                taken = (
                    f"the key {record.key!r}" if record.key is not None and item_id is None else f"item id {item_id}"
                )
                raise DataError(f"{taken} is already in {self.path}") from None
            inserted.append(int(cursor.lastrowid or 0))  # set by every INSERT
        return inserted

    def _values(
        self, records: Sequence[ImageRecord], rows: Sequence[int], given: Sequence[int | None]
    ) -> list[tuple[Any, ...]]:
        """The column values of each record (its text checked), ``key`` last when the table has keys."""
        paths: dict[Path, str] = {}  # items added by vector share one path: made relative once
        result = []
        for record, row, item_id in zip(records, rows, given, strict=True):
            _check_text(record)
            if (path := paths.get(record.path)) is None:
                path = paths[record.path] = stored_path(record.path, self.root)
            metadata = json.dumps(record.metadata, default=str, sort_keys=True)
            values = (item_id, path, record.label, record.split, int(record.is_query), int(record.is_gallery))
            result.append((*values, metadata, int(row), *((record.key,) if self._keyed else ())))
        return result

    def _insert_new(self, statement: str, rows_values: list[tuple[Any, ...]]) -> list[int] | None:
        """Insert items that take new ids in one ``executemany``: AUTOINCREMENT gives them the ids after
        ``last_id``, in order. None, with nothing inserted, when a key is in use (the row-by-row insert then
        names it)."""
        first = self.last_id + 1
        self._db.execute("SAVEPOINT bulk_insert")
        try:
            self._db.executemany(statement, rows_values)
        except sqlite3.IntegrityError:
            self._db.execute("ROLLBACK TO bulk_insert")
            self._db.execute("RELEASE bulk_insert")
            return None
        self._db.execute("RELEASE bulk_insert")
        if self.last_id != first + len(rows_values) - 1:  # never: AUTOINCREMENT counts on from last_id
            raise IndexFormatError(f"{self.path} gave unexpected ids to new items; run `retrieval index verify`")
        return list(range(first, first + len(rows_values)))

    @property
    def last_id(self) -> int:
        """The largest id ever given (AUTOINCREMENT's counter: removed items included), 0 for none."""
        row = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'items'").fetchone()
        return int(row[0]) if row else 0

    def reserve_ids_through(self, last_id: int) -> None:
        """Never give an id up to ``last_id`` to a new item (another index's ids, which are never reused)."""
        if last_id > self.last_id:
            updated = self._db.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'items'", (last_id,))
            if updated.rowcount == 0:
                self._db.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('items', ?)", (last_id,))

    def remembered(self) -> dict[str, str]:
        """Every idempotency key with its recorded result (as JSON text)."""
        try:
            return dict(self._db.execute("SELECT key, result FROM idempotency").fetchall())
        except sqlite3.OperationalError:  # no such table yet
            return {}

    def remember_json(self, key: str, result_json: str) -> None:
        """``remember`` for a result already in JSON text (copied from another index)."""
        self._db.execute("CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, result TEXT NOT NULL)")
        self._db.execute("INSERT OR IGNORE INTO idempotency (key, result) VALUES (?, ?)", (key, result_json))

    def remember(self, key: str, result: dict[str, Any]) -> None:
        """Record the result of the write made under an idempotency key (inside that write's transaction)."""
        self._db.execute("CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, result TEXT NOT NULL)")
        self._db.execute("INSERT INTO idempotency (key, result) VALUES (?, ?)", (key, json.dumps(result)))

    def recall(self, key: str) -> dict[str, Any] | None:
        """The result first recorded under ``key``, or None (also for indexes that never recorded one)."""
        try:
            row = self._db.execute("SELECT result FROM idempotency WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError:  # no such table yet
            return None
        return None if row is None else dict(json.loads(row[0]))

    def delete(self, ids: Sequence[int]) -> int:
        """Delete the given ids (unknown ones are ignored); returns how many were deleted."""
        deleted = 0
        for start in range(0, len(ids), _CHUNK):
            chunk = [int(i) for i in ids[start : start + _CHUNK]]
            marks = ",".join("?" * len(chunk))
            deleted += self._db.execute(f"DELETE FROM items WHERE id IN ({marks})", chunk).rowcount
        return deleted

    @property
    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM items").fetchone()[0])

    def id_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, embedding rows) of all items, sorted by id."""
        pairs = self._db.execute("SELECT id, row FROM items ORDER BY id").fetchall()
        array = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        return array[:, 0].copy(), array[:, 1].copy()

    def items(self, ids: Sequence[int]) -> list[Item | None]:
        """Items in the order of ``ids``; ``None`` where an id does not exist."""
        found: dict[int, Item] = {}
        wanted = [int(i) for i in ids]
        root = self.root  # once per call, not per row: a search's ten rows spent half their time here
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for row in self._db.execute(f"SELECT {self._columns} FROM items WHERE id IN ({marks})", chunk):
                found[row[0]] = _item(row, root)
        return [found.get(i) for i in wanted]

    def all_items(self) -> list[Item]:
        return [_item(row, self.root) for row in self._db.execute(f"SELECT {self._columns} FROM items ORDER BY id")]

    def paths_in_use(self, paths: Sequence[str]) -> set[str]:
        """Which of ``paths`` some item still points to (stored relative or, by an older version, absolute)."""
        forms = {form: path for path in paths for form in (stored_path(path, self.root), str(path))}
        marks = ",".join("?" * len(forms))
        query = f"SELECT DISTINCT path FROM items WHERE path IN ({marks})"
        return {forms[row[0]] for row in self._db.execute(query, list(forms))}

    def matching_ids(self, where: ItemFilter) -> np.ndarray:
        """Ids (ascending) of the items that pass ``where`` (``filter_sql``): label equality through its
        SQLite index, metadata by a scan of the JSON column. The ids come back as one text (a Python row per
        id costs 3x as much: 0.8 ms for 1000 ids) and are sorted here (SQLite's ORDER BY would sort the label
        index's rows in a temporary B-tree); bench/bench_filtered_search.py measures it."""
        clause, params = filter_sql(where)
        ((text,),) = self._db.execute(f"SELECT group_concat(id, ' ') FROM items WHERE {clause}", params).fetchall()
        return np.sort(np.fromstring(text, dtype=np.int64, sep=" ")) if text else np.zeros(0, dtype=np.int64)

    def keys_in_use(self, keys: Sequence[str]) -> set[str]:
        """Which of the metadata ``keys`` some item has (each an early-stopping scan)."""
        test = "SELECT 1 FROM items WHERE json_valid(metadata) AND json_type(metadata, ?) IS NOT NULL LIMIT 1"
        return {key for key in keys if self._db.execute(test, (f'$."{key}"',)).fetchone() is not None}

    def metadata_keys(self) -> list[str]:
        """Every metadata key some item has, sorted."""
        rows = self._db.execute(
            "SELECT DISTINCT j.key FROM items, json_each(items.metadata) AS j "
            "WHERE json_valid(items.metadata) ORDER BY j.key"
        )
        return [str(row[0]) for row in rows]

    def value_counts(self, key: str | None) -> list[tuple[Scalar, int]]:
        """(value, items) of the label (``key`` None) or of a metadata key, most items first (ties by
        value); numbers by value (3 and 3.0 are one value), items without the key left out."""
        if key is None:
            rows = self._db.execute("SELECT label, COUNT(*) FROM items GROUP BY label")
            return _by_count([(str(label), int(count)) for label, count in rows])
        kind = "CASE json_type(metadata, ?1) WHEN 'integer' THEN 'real' ELSE json_type(metadata, ?1) END"
        rows = self._db.execute(
            f"SELECT {kind} AS kind, json_extract(metadata, ?1), COUNT(*) FROM items "
            "WHERE json_valid(metadata) AND json_type(metadata, ?1) IS NOT NULL GROUP BY kind, 2",
            (f'$."{key}"',),
        )
        return _by_count([(_json_value(kind, value), int(count)) for kind, value, count in rows])

    def labels(self) -> list[str]:
        return [row[0] for row in self._db.execute("SELECT DISTINCT label FROM items ORDER BY label")]


def _json_value(kind: str, value: Any) -> Scalar:
    """A value read with ``json_extract`` as its JSON scalar (SQLite reads true as 1, false as 0)."""
    return {"true": True, "false": False, "null": None}.get(kind, value)


def _by_count(pairs: list[tuple[Scalar, int]]) -> list[tuple[Scalar, int]]:
    return sorted(pairs, key=lambda pair: (-pair[1], json.dumps(pair[0])))


class _ItemScore(NamedTuple):
    item: Item
    score: float


class Hit(_ItemScore):
    """One ranked search result: the stored item, its score (higher is closer) and ``probability``, the
    calibrated chance that it shares the query's class (None: the model has no calibration, or the scores were
    post-processed; ``retrieval.indexing.probability``). A tuple of (item, score), so ``for item, score in
    hits`` reads it too. Its score is clipped to the documented -1..1: float16 storage put 1.0002."""

    probability: float | None

    def __new__(cls, item: Item, score: float, probability: float | None = None) -> Hit:
        hit = super().__new__(cls, item, min(1.0, max(-1.0, score)))
        hit.probability = probability
        return hit

    def __repr__(self) -> str:
        return f"Hit(item={self.item!r}, score={self.score!r}, probability={self.probability!r})"
