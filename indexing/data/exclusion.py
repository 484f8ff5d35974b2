"""Images left out of a dataset by a list of paths (``retrieval train --exclude FILE``; ``retrieval data
duplicates --exclude-list FILE`` writes one): one path a line, blank lines and ``#`` comments ignored,
matched against the records' paths once both are made absolute."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.data.records import ImageRecord


def read_exclude_list(path: Path) -> set[Path]:
    """The absolute paths listed in ``path``; a ConfigError when it cannot be read."""
    try:
        lines = Path(path).read_bytes().decode("utf-8", "surrogateescape").splitlines()  # a non-UTF-8 name: its bytes
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read the exclusion list {path}: {error.__class__.__name__}") from None
    return {Path(line.strip()).absolute() for line in lines if line.strip() and not line.lstrip().startswith("#")}


def drop_excluded(records: Sequence[ImageRecord], listed: set[Path]) -> tuple[list[ImageRecord], list[Path]]:
    """The records whose path is not ``listed``, and the paths of those left out (in record order)."""
    kept, left_out = [], []
    for record in records:
        if Path(record.path).absolute() in listed:
            left_out.append(record.path)
        else:
            kept.append(record)
    return kept, left_out
