"""The CSV manifest layout: one row per image with ``path,label`` and optional protocol columns.

Optional columns: ``split`` (``train`` or ``test``; leave the whole column empty to let the
class-disjoint split rule decide), ``is_query`` and ``is_gallery`` (booleans such as
true/false, 1/0, yes/no; empty means true), ``key`` (the item's own id, unique per index; an empty
cell gives none). Any other column is kept in ``ImageRecord.metadata``. Relative paths resolve against the CSV file's folder.
"""

from __future__ import annotations

import csv
from pathlib import Path

from retrieval.indexing.common.artifact_names import CSV_MANIFEST_NAME
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.layouts.layout_files import require_files_exist, require_nonempty
from retrieval.indexing.data.records import ImageRecord

REQUIRED_COLUMNS = ("path", "label")
PROTOCOL_COLUMNS = ("split", "is_query", "is_gallery")
KEY_COLUMN = "key"
SPLIT_VALUES = ("train", "test")
_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


def find_manifest(path: Path) -> Path | None:
    """``path`` itself if it is a ``.csv`` file, or ``path/manifest.csv`` for a folder."""
    if path.is_file() and path.suffix.lower() == ".csv":
        return path
    candidate = path / CSV_MANIFEST_NAME
    return candidate if path.is_dir() and candidate.is_file() else None


def load_csv_manifest(csv_path: Path) -> list[ImageRecord]:
    """Parse and validate the manifest; every listed file must exist."""
    csv_path = Path(csv_path).absolute()
    try:
        with open(csv_path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            _check_columns(list(reader.fieldnames or []) or None, csv_path)
            records = [_parse_row(row, number, csv_path) for number, row in enumerate(reader, start=2)]
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise DataError(f"cannot read CSV manifest {csv_path}: {error}") from None
    require_nonempty(records, csv_path)
    require_files_exist(records, csv_path)
    return records


def _check_columns(fieldnames: list[str] | None, csv_path: Path) -> None:
    columns = [name.strip() for name in fieldnames or []]
    missing = [name for name in REQUIRED_COLUMNS if name not in columns]
    if missing:
        raise DataError(
            f"CSV manifest {csv_path} lacks the column(s) {', '.join(missing)}; its header must name "
            f"path and label (optional: {', '.join((*PROTOCOL_COLUMNS, KEY_COLUMN))}), found: {', '.join(columns) or 'nothing'}"
        )


def _parse_row(row: dict[str | None, str | None], number: int, csv_path: Path) -> ImageRecord:
    if None in row:
        raise DataError(f"{csv_path} line {number} has more fields than the header; quote values that contain commas")
    values = {(key or "").strip(): (value or "").strip() for key, value in row.items()}
    where = f"{csv_path} line {number}"
    if not values["path"] or not values["label"]:
        raise DataError(f"{where} has an empty path or label; every row needs both")
    path = Path(values["path"])
    reserved = (*REQUIRED_COLUMNS, *PROTOCOL_COLUMNS, KEY_COLUMN)
    metadata = {key: value for key, value in values.items() if key not in reserved}
    return ImageRecord(
        path=path if path.is_absolute() else csv_path.parent / path,
        label=values["label"],
        split=_parse_split(values.get("split", ""), where),
        is_query=parse_bool(values.get("is_query", ""), where, "is_query"),
        is_gallery=parse_bool(values.get("is_gallery", ""), where, "is_gallery"),
        metadata=metadata,
        key=values.get(KEY_COLUMN) or None,
    )


def _parse_split(value: str, where: str) -> str | None:
    if not value:
        return None
    if value.lower() not in SPLIT_VALUES:
        raise DataError(f"{where}: split {value!r} must be one of {', '.join(SPLIT_VALUES)} or empty")
    return value.lower()


def parse_bool(value: str, where: str, column: str) -> bool:
    """A CSV boolean cell; empty means True (the ImageRecord default)."""
    lowered = value.lower()
    if not lowered or lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise DataError(f"{where}: {column} {value!r} is not a boolean (use true/false, yes/no or 1/0)")
