"""Item keys from a file: ``retrieval index add --keys FILE`` (a CSV manifest's ``key`` column is the other way).

The file is a CSV with the columns ``path`` and ``key``, one row per image to key; relative paths resolve
against the file's folder, as in a CSV manifest. Images the file does not list get no key; a listed path
that is not among the images added is an error (a typo would otherwise silently leave an image keyless).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.common.unicode_text import shown
from retrieval.indexing.data.records import ImageRecord

KEY_FILE_COLUMNS = ("path", "key")


def read_key_file(path: Path) -> dict[str, str]:
    """normalised absolute image path -> key, from a ``path,key`` CSV (a DataError naming the line)."""
    path = Path(path).absolute()
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            columns = [name.strip() for name in reader.fieldnames or []]
            if columns[:2] != list(KEY_FILE_COLUMNS):
                raise DataError(
                    f"{path} must be a CSV whose header is path,key; found: {','.join(columns) or 'nothing'}"
                )
            return dict(_row(row, number, path) for number, row in enumerate(reader, start=2))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise DataError(f"cannot read the key file {path}: {error}") from None


def _row(row: dict[str | None, str | None], number: int, path: Path) -> tuple[str, str]:
    image, key = (row.get("path") or "").strip(), (row.get("key") or "").strip()
    if not image or not key:
        raise DataError(f"{path} line {number} has an empty path or key; every row needs both")
    return _normal(path.parent / image), key


def _normal(path: Path) -> str:
    return os.path.normpath(Path(path).absolute())


def with_keys(records: Sequence[ImageRecord], keys: dict[str, str], source: Path) -> list[ImageRecord]:
    """The records, each listed one with its key from ``keys`` (``read_key_file``)."""
    keyed = [replace(record, key=keys.get(_normal(record.path), record.key)) for record in records]
    unknown = set(keys) - {_normal(record.path) for record in records}
    if unknown:
        first = shown(min(unknown))
        raise DataError(f"{source} lists {len(unknown)} image(s) that are not among the images added, e.g. {first}")
    return keyed
