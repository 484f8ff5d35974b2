"""The audit's use cases, one per kind of input, each the one function its CLI command, Python API call and
HTTP route run: ``audit_dataset`` (images and an exported model: ``retrieval data audit DATA --model``),
``audit_vectors`` (``--vectors EMB.npy --items ITEMS.csv``), ``audit_index`` and ``audit_store`` (a gallery's
stored embeddings: ``retrieval index audit``; ``AuditCache`` keeps a served index's) and ``audit_page`` (``GET /audit``: the rows of ``label_issues.csv`` as JSON, paged).
Copies never vouch for each other: a dataset's exact and near copies come from ``retrieval data duplicates``'s
own detection, identical vectors from ``data.pixel_hash.exact_copy_sets`` over their bytes."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.indexing.audit.audit_records import record_audit
from retrieval.indexing.audit.audit_report import AuditReport, page
from retrieval.indexing.audit.audit_scores import audit_scores
from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.data.bad_images import scan_images
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.duplicates.copy_groups import copy_groups
from retrieval.indexing.duplicates.dataset_duplicates import (
    SplitSettings,
    embedded_copies,
    find_exact_copies,
)
from retrieval.indexing.duplicates.pixel_hash import exact_copy_sets
from retrieval.indexing.exported_model.embedding_files import embedding_table
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.resolution import resolve_export_dir
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.shared.store_protocol import Store
from retrieval.indexing.store.stored_embeddings import stored_embedding_table
from retrieval.indexing.usecases.inputs import Data, PathLike, records_of
from retrieval.indexing.usecases.vector_build import items_of
from retrieval.indexing.usecases.vector_input import checked_vectors, read_vector_file


def audit_dataset(
    model: PathLike,
    data: Data,
    out: PathLike | None = None,
    *,
    exclude_list: PathLike | None = None,
    split: SplitSettings = SplitSettings(),
    progress: bool = True,
) -> AuditReport:
    """Audit the images of ``data`` embedded by ``model`` (an export or run directory); writes the audit's files
    to ``out`` when given."""
    records = records_of(data, "all")
    if len(records) < 3:
        raise DataError(f"an audit needs three labelled images or more; {data} holds {len(records)}")
    embedder = OnnxEmbedder(resolve_export_dir(Path(model)))
    embedded = embedding_table(embedder, records, progress=progress)
    try:
        copies = embedded_copies(records, embedded, embedder.manifest, split=split, progress=progress)
    except ConfigError:  # a model without a measured copy threshold: exact copies only
        copies = find_exact_copies(records, split=split, progress=progress)
    quality = scan_images(records, progress=progress)
    row_of = {record_position: row for row, record_position in enumerate(embedded.table.ids)}
    groups = _pair_groups(copies.pairs, row_of, len(embedded.table.ids))
    table = embedded.table
    scores = audit_scores(table.embeddings, table.labels, groups, progress=progress)
    facts = {
        "exact_copies": copies.counts("exact").phrase(),
        "near_copies": copies.counts("near").phrase()
        if copies.thresholds is not None
        else "not looked for (the model has no measured copy threshold)",
        "unreadable": [str(path) for path, _ in quality.bad],
        "tiny": [str(path) for path, _ in quality.small],
    }
    report = AuditReport(table.paths, "path", scores, facts, images=True)
    if out is not None and isinstance(data, str | Path):
        record_audit(Path(data), Path(out), report.counts())
    return _written(report, out, exclude_list)


def audit_vectors(
    vectors: PathLike, items: PathLike | None, out: PathLike | None = None, *, exclude_list: PathLike | None = None
) -> AuditReport:
    """Audit the vectors of a ``.npy`` file with the labels of ``items`` (``retrieval embed``'s sidecar by
    default): a ``key`` column names the items if there is one, else ``path``."""
    raw = read_vector_file(Path(vectors))
    checked = checked_vectors(raw, raw.shape[-1]).vectors
    records = items_of(Path(items) if items is not None else None, Path(vectors), len(checked))
    return _written(_vector_report(checked, records), out, exclude_list)


def audit_index(index: PathLike, out: PathLike | None = None, *, exclude_list: PathLike | None = None) -> AuditReport:
    """Audit a gallery: the stored embeddings of ``index`` with their items' labels."""
    with open_store(Path(index)) as store:
        return _written(audit_store(store), out, exclude_list)


def audit_store(store: Store) -> AuditReport:
    """The audit of an open store's items (``retrieval index audit``, ``GET /audit``), named by key, else path."""
    items = store.all_items()
    keyed = any(item.key for item in items)
    names = [str(item.key if keyed else item.path) for item in items]
    table = stored_embedding_table(store)
    scores = audit_scores(table.embeddings, table.labels, _identical_rows(table.embeddings))
    return AuditReport(names, "key" if keyed else "path", scores, images=not keyed, ids=[int(i) for i in table.ids])


class AuditCache:
    """The last audit of a store, kept until it changes (its build, item count or largest id); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[object, ...] | None = None
        self._report: AuditReport | None = None

    def report(self, store: Store) -> AuditReport:
        ids = store.ids()
        key = (id(store), store.manifest.build_id, len(ids), int(ids[-1]) if len(ids) else 0)
        with self._lock:
            if self._key != key or self._report is None:
                self._report, self._key = audit_store(store), key
            return self._report


def audit_page(report: AuditReport, offset: int = 0, limit: int = 50) -> dict[str, Any]:
    """``GET /audit``: the rows of ``label_issues.csv`` from ``offset``, at most ``limit``, with the total."""
    rows = report.label_rows()
    return {"total": len(rows), "offset": offset, "rows": page(rows, offset, limit)}


def _vector_report(vectors: np.ndarray, records: Sequence[ImageRecord]) -> AuditReport:
    keyed = any(record.key for record in records)
    names = [str(record.key if keyed else record.path) for record in records]
    labels = [record.label for record in records]
    scores = audit_scores(vectors, labels, _identical_rows(vectors))
    return AuditReport(names, "key" if keyed else "path", scores)


def _identical_rows(vectors: np.ndarray) -> list[list[int]]:
    """Groups of rows with the same bytes: exact copies, as ``data.pixel_hash`` groups images."""
    digests = [hashlib.sha256(np.ascontiguousarray(row).tobytes()).hexdigest() for row in vectors]
    return exact_copy_sets(digests)


def _pair_groups(pairs: Sequence[Any], row_of: dict[int, int], count: int) -> list[list[int]]:
    """The copy pairs of a dataset (record positions) as groups of embedding rows."""
    kept = [(row_of[p.a], row_of[p.b]) for p in pairs if p.a in row_of and p.b in row_of]
    first = np.array([a for a, _ in kept], np.int64)
    second = np.array([b for _, b in kept], np.int64)
    return [group.tolist() for group in copy_groups(first, second, count)]


def _written(report: AuditReport, out: PathLike | None, exclude_list: PathLike | None) -> AuditReport:
    if out is not None:
        report.write(Path(out), Path(exclude_list) if exclude_list is not None else None)
    return report
