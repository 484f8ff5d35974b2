"""Change an existing index: add images, remove items, compact (``retrieval index add|remove|compact``, the
Python API's ``remove``). Every item write of every door goes through here or ``vectors`` (by vector) and
``deleting`` (by filter): ``add_embedded`` (images once embedded, by any door; a key's upsert with
``replace``), ``remove_from`` (items by id or key, in an open store: ``DELETE /items/{id}``, ``DELETE
/items/by-key/{key}``, ``retrieval index remove``, ``remove``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from retrieval.indexing.common.errors import ConfigError, ItemNotFoundError
from retrieval.indexing.data.record_keys import read_key_file, with_keys
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.exported_model.onnx_embedder import embed_records
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.shared.index_directory.compaction import CompactionPolicy, CompactionResult
from retrieval.indexing.store.shared.index_directory.index_manifest import check_model, load_index_manifest
from retrieval.indexing.store.shared.index_directory.write_lock import exclusive_writer
from retrieval.indexing.store.shared.items.item_filter import Scalar
from retrieval.indexing.store.shared.items.items_db import Item
from retrieval.indexing.store.shared.store_checks import check_keys_free, validate_records
from retrieval.indexing.store.shared.store_protocol import Store
from retrieval.indexing.usecases.inputs import query_embedder

LISTED_IDS = 10  # unknown ids named in an error


@dataclass(frozen=True)
class AddReport:
    """The new item ids, the index's size after the add, and the images that could not be read."""

    ids: list[int]
    count: int
    failures: list[tuple[Path, str]]
    dba: int | None = None  # the new items were augmented with this many neighbours (a DBA index)
    replaced: int = 0  # items whose keys the new ones took over (``replace``)


@dataclass(frozen=True)
class CompactReport:
    result: CompactionResult
    policy: CompactionPolicy  # the thresholds of automatic compaction now stored
    count: int


def add_images(
    index_dir: Path,
    data: Path,
    *,
    metadata: Mapping[str, Scalar] | None = None,
    batch_size: int = 32,
    threads: int | None = None,
    progress: bool = True,
    dba: int | None = None,
    keys: Path | None = None,
    replace_keyed: bool = False,
) -> AddReport:
    """Embed the images of ``data`` with the index's own model and add them (new ids, old ids
    unchanged), each with ``metadata`` over its own. A DBA index augments them as its build did;
    ``dba`` (``--dba N``) must then be its N, and is refused on an index built without it.

    Item keys come from a CSV manifest's ``key`` column or from ``keys``, a ``path,key`` file
    (``record_keys``). A key an item already carries is a KeyConflictError before anything is embedded,
    unless ``replace_keyed``: that item is then replaced by the new one in the same generation."""
    built = load_index_manifest(index_dir).postprocess.dba
    if dba is not None and (built is None or built.n != dba):
        how = "without --dba" if built is None else f"with --dba {built.n}"
        raise ConfigError(f"{index_dir} was built {how}; rebuild it with --dba {dba} to change its augmentation")
    embedder = query_embedder(index_dir, threads=threads)
    check_model(load_index_manifest(index_dir), embedder.model_sha256)
    extra = dict(metadata or {})
    records = [replace(record, metadata={**record.metadata, **extra}) for record in load_records(data)]
    if keys is not None:
        records = with_keys(records, read_key_file(keys), keys)
    validate_records(records)
    if not replace_keyed:
        with open_store(index_dir) as store:  # refused before the embedding, checked again by the add
            check_new_keys(store, [record.key for record in records])
    kept, embeddings, failures = embed_records(embedder, records, batch_size=batch_size, progress=progress)
    # Opened under the writer lock, after embedding: the add extends the newest generation even while
    # the service writes steadily (a store opened before embedding would be stale by then).
    with exclusive_writer(index_dir), open_store(index_dir, expected_model_sha256=embedder.model_sha256) as store:
        added = add_embedded(store, kept, embeddings, replace=replace_keyed)
        return AddReport(added.ids, added.count, failures, built.n if built is not None else None, added.replaced)


@dataclass(frozen=True)
class Addition:
    """What one add did: the new ids, the store's size after it, the items whose keys it took over."""

    ids: list[int]
    count: int
    replaced: int = 0


def check_new_keys(store: Store, keys: Sequence[str | None]) -> None:
    """A key already in ``store`` is a KeyConflictError, said before any image is embedded (the add checks
    again); None: an item without a key. ``retrieval index add`` and ``POST /items`` both ask here."""
    given = [key for key in keys if key is not None]
    if given:
        check_keys_free(given, store.ids_of_keys(given))


def add_embedded(
    store: Store,
    records: Sequence[ImageRecord],
    embeddings: np.ndarray,
    *,
    replace: bool = False,
    idempotency_key: str | None = None,
    request_digest: str | None = None,
) -> Addition:
    """The add of every door once its images are embedded (``retrieval index add``, the Python API, ``POST
    /items``): the records and their embeddings into ``store``, the caller holding its writer."""
    before = store.count
    added = store.add(
        records, embeddings, idempotency_key=idempotency_key, replace=replace, request_digest=request_digest
    )
    ids = [int(i) for i in added]
    return Addition(ids, store.count, before + len(ids) - store.count)


@dataclass(frozen=True)
class Removal:
    """The items removed (the service discards their stored uploads), how many, and the index's size after."""

    items: list[Item]
    removed: int
    count: int


def remove_from(store: Store, ids: Sequence[int] = (), keys: Sequence[str] = ()) -> Removal:
    """Remove the items with ``ids`` and those carrying ``keys`` from an open store (the caller holds its
    writer); an unknown id or key is an ItemNotFoundError and removes nothing."""
    found = [store.item(item_id) for item_id in ids] + [store.item_by_key(key) for key in keys]
    items = list({item.id: item for item in found}.values())
    removed = store.remove([item.id for item in items])
    return Removal(items, removed, store.count)


def remove(index: Path | str, ids: Sequence[int] = (), *, keys: Sequence[str] = ()) -> tuple[int, int]:
    """(items removed, items left): the Python API's ``remove`` of items by id or key, under the index's
    writer lock (the service may write meanwhile), as ``retrieval index remove``."""
    with exclusive_writer(Path(index)):
        return remove_items(Path(index), ids, keys=keys)


def remove_items(index_dir: Path, ids: Sequence[int], *, keys: Sequence[str] = ()) -> tuple[int, int]:
    """(items removed, items left) of the items with ``ids`` and those carrying ``keys``; an id or key the
    index does not hold removes nothing and fails."""
    if not ids and not keys:
        raise ConfigError("name the items to remove: their ids, or --key KEY")
    with open_store(index_dir) as store:
        unknown = sorted(set(ids) - set(store.ids().tolist()))
        if unknown:
            shown = ", ".join(map(str, unknown[:LISTED_IDS])) + (" ..." if len(unknown) > LISTED_IDS else "")
            raise ItemNotFoundError(
                f"{len(unknown)} of the ids are not in {index_dir} ({shown}); nothing was removed "
                "(`retrieval index info` shows what the index holds)"
            )
        found = store.ids_of_keys(keys)
        if missing := [key for key in keys if key not in found]:
            raise ItemNotFoundError(
                f"no item carries the key {missing[0]!r}"
                + (f" (nor {len(missing) - 1} other key(s))" if len(missing) > 1 else "")
                + "; nothing was removed"
            )
        removal = remove_from(store, [*ids, *found.values()])
        return removal.removed, removal.count


def compact_index(index_dir: Path, changes: Mapping[str, int | float | None]) -> CompactReport:
    """Merge the base, every delta segment and no removed item into one new base; ``changes`` (None:
    unchanged) update the stored thresholds of automatic compaction."""
    with open_store(index_dir) as store:
        stored = store.manifest.compaction.model_dump()
        policy = CompactionPolicy(**{**stored, **{k: v for k, v in changes.items() if v is not None}})
        result = store.compact(policy=policy)
        return CompactReport(result, policy, store.count)
