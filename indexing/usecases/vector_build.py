"""An index built from vectors alone (``retrieval index build --vectors EMB.npy --items ITEMS.csv``): the
vectors-only branch of ``building.run_build``.

``ITEMS.csv`` has one row per vector, in order: the columns ``retrieval embed`` writes beside its
``.npy`` (``id``, ``path``, ``label``, ``split``) are read as such (``id`` is the row's number in the
embedding; the index gives its own ids), ``key`` is the item's key, ``metadata`` a JSON object, and any
other column one metadata field (an empty cell: no field). Without ``--items`` the ``EMB.items.csv``
beside the vectors is read, and without that every item is ``unlabelled``. The vectors pass the checks
of every vector door (``vector_input.checked_vectors``) and are written by the one index writer
(``builder.write_built``: binary codes by the same ``binarize`` as an image build). The index has no
model (``NoModel``): it answers searches and adds by vector and refuses what needs the model.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.embedding_files import sidecar_path
from retrieval.indexing.exported_model.model_manifest import file_sha256
from retrieval.indexing.exported_model.no_model import NoModel
from retrieval.indexing.store.build.builder import (
    BuildReport,
    Built,
    index_kinds,
    with_postprocess,
    write_built,
)
from retrieval.indexing.store.shared.index_directory.index_dir import check_out_dir
from retrieval.indexing.store.shared.index_directory.index_manifest import utc_now
from retrieval.indexing.store.shared.store_checks import validate_records
from retrieval.indexing.usecases.build_request import BuildRequest
from retrieval.indexing.usecases.vector_input import (
    DEFAULT_LABEL,
    VECTOR_PATH,
    checked_vectors,
    read_vector_file,
    vector_records,
)

EMBED_ONLY_COLUMNS = ("id",)
"""Columns of ``retrieval embed``'s sidecar that are not the item's: its row numbers."""


def build_from_vectors(request: BuildRequest, vectors_path: Path) -> BuildReport:
    """Write the index of the vectors in ``vectors_path`` and the items of ``request.items`` to ``request.out``."""
    started = time.perf_counter()
    target = with_postprocess(request.target, request.postprocess)
    kinds = index_kinds(request.float_kind, request.binary_kind)
    raw = read_vector_file(vectors_path)
    checked = checked_vectors(raw, raw.shape[-1])
    records = items_of(request.items, vectors_path, len(checked.vectors))
    validate_records(records)
    check_out_dir(request.out)
    model = NoModel.of_vectors(file_sha256(vectors_path), checked.vectors.shape[1], vectors_path, utc_now())
    built = Built(model, records, checked.vectors, time.perf_counter() - started, started)
    return write_built(request.out, built, kinds, progress=request.progress, target=target)


def items_of(items: Path | None, vectors_path: Path, count: int) -> list[ImageRecord]:
    """The records of ``count`` vectors from ``items`` (or the sidecar ``retrieval embed`` writes beside
    ``vectors_path``; neither: ``count`` unlabelled items); a row count that differs is a DataError."""
    source = items if items is not None else sidecar_path(vectors_path)
    if items is None and not source.is_file():
        return vector_records(count)
    rows = _read_rows(source)
    if len(rows) != count:
        raise DataError(f"{source} has {len(rows)} rows for {count} vectors; give one row per vector, in order")
    records = vector_records(
        count,
        labels=[(row.get("label") or "").strip() or DEFAULT_LABEL for row in rows],
        keys=[row.get("key") or None for row in rows],
        metadata=[_metadata(row, number, source) for number, row in enumerate(rows, start=1)],
    )
    return [_with_source(record, row) for record, row in zip(records, rows, strict=True)]


def _read_rows(source: Path) -> list[dict[str, str]]:
    try:
        with open(source, newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    except FileNotFoundError:
        raise DataError(f"there is no items file {source}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise DataError(f"cannot read {source} as a UTF-8 CSV of items ({error})") from None


def _metadata(row: dict[str, str], number: int, source: Path) -> dict[str, Any]:
    """Row ``number``'s metadata: its ``metadata`` JSON object, then every other non-empty cell."""
    fields: dict[str, Any] = {}
    if text := (row.get("metadata") or "").strip():
        try:
            fields = json.loads(text)
        except json.JSONDecodeError:
            fields = None  # type: ignore[assignment]
        if not isinstance(fields, dict):
            raise DataError(f"{source} row {number}: the metadata column must hold a JSON object")
    known = {"key", "label", "path", "split", "metadata", *EMBED_ONLY_COLUMNS}
    extra = {name: value for name, value in row.items() if name and name not in known and value}
    return {**fields, **extra}


def _with_source(record: ImageRecord, row: dict[str, str]) -> ImageRecord:
    """The record with the row's image ``path`` and ``split`` when it has them."""
    path = Path(row["path"]) if row.get("path") else VECTOR_PATH
    return dataclasses.replace(record, path=path, split=row.get("split") or None)
