"""Reading the small whitespace-separated text tables of the official DML datasets.

CUB-200-2011, Stanford Online Products and In-Shop describe themselves with plain text
files of ``id value ...`` rows; every layout module parses them the same way and reports
missing image files the same way (a count plus the first few paths).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord

MISSING_SHOWN = 3


def read_rows(path: Path, columns: int, skip: int = 0) -> list[list[str]]:
    """The non-blank lines of ``path`` after ``skip`` header lines, split into ``columns`` fields.

    The last field keeps any spaces (file names may contain them).
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"cannot read {path}: {error}") from None
    rows = []
    for number, line in enumerate(lines[skip:], start=skip + 1):
        if not line.strip():
            continue
        fields = line.split(maxsplit=columns - 1)
        if len(fields) != columns:
            raise DataError(f"{path} line {number} has {len(fields)} fields, expected {columns}: {line.strip()!r}")
        rows.append(fields)
    return rows


def parse_int(value: str, path: Path, what: str) -> int:
    """``int(value)``, or a DataError naming the file and the field."""
    try:
        return int(value)
    except ValueError:
        raise DataError(f"{path}: {what} {value!r} is not an integer") from None


def require_files_exist(records: Sequence[ImageRecord], source: Path) -> None:
    """Raise one DataError listing how many record paths are missing (and the first few)."""
    missing = [record.path for record in records if not record.path.is_file()]
    if not missing:
        return
    shown = ", ".join(str(path) for path in missing[:MISSING_SHOWN])
    more = f" and {len(missing) - MISSING_SHOWN} more" if len(missing) > MISSING_SHOWN else ""
    raise DataError(
        f"{len(missing)} of {len(records)} images listed by {source} do not exist: {shown}{more} "
        "(check that the images were extracted next to the list file)"
    )


def require_nonempty(records: Sequence[ImageRecord], source: Path) -> None:
    """An empty dataset is always a mistake; say where we looked."""
    if not records:
        raise DataError(f"{source} lists no images")
